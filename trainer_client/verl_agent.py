"""A verl agent loop whose environment is Plaudit's simulated user (``plaudit_simulated_user``).

verl removed its ``BaseInteraction`` user interface; multi-turn rollouts now go through agent
loops: ``AgentLoopBase`` subclasses registered by name (``@register``), instantiated per sample
with ``trainer_config``, ``server_manager``, ``tokenizer`` and ``processor``, whose
``run(sampling_params, **dataset_fields)`` returns an ``AgentLoopOutput``. Modelled on
``verl/experimental/agent_loop/agent_loop.py`` at volcengine/verl commit
6c923f3b724ad8a3647e9fc818e485c078703d07 (``AgentLoopBase``, ``AgentLoopOutput``,
``register``, ``AsyncLLMServerManager.generate(request_id, *, prompt_ids, sampling_params)``
returning a ``TokenOutput`` with ``token_ids`` and ``log_probs``).

Use it by importing this module where verl's agent-loop workers run (e.g. an
``agent_loop_config_path`` entry with ``_target_: trainer_client.verl_agent.SimulatedUserAgentLoop``
and ``name: plaudit_simulated_user``), and give dataset rows ``agent_name:
plaudit_simulated_user``; a row's ``extra_info.goal`` (or ``goal``) is the user's goal. The
response holds the policy's tokens (mask 1) and the user's (mask 0); ``extra_fields`` carry
``termination``, ``satisfaction`` (after each policy turn) and ``final_satisfaction`` for the
reward function, and ``turn_scores``/``tool_rewards`` as verl's own loops do. As verl's own
loops (verl 0.9.1), it renders the prompt with ``data.apply_chat_template_kwargs``, keeps the
last ``rollout.prompt_length`` prompt tokens, and reports ``metrics.generate_sequences``.
Server and calibration come from the environment (see
``trainer_client.simulator``). Without verl installed the module imports, and
:data:`SimulatedUserAgentLoop` is None.
"""

from __future__ import annotations

import os
import time
import uuid
from typing import Any

from trainer_client.simulator import (
    DEFAULT_MAX_TURNS,
    ChatTokens,
    Rollout,
    SimulatorClient,
    simulate_dialogue,
)

AGENT_NAME = "plaudit_simulated_user"
ENV_MAX_TURNS = "PLAUDIT_SIMULATOR_MAX_TURNS"

try:
    from verl.experimental.agent_loop.agent_loop import (
        AgentLoopBase,
        AgentLoopOutput,
        register,
    )
except ImportError:  # verl is not installed: nothing to register
    AgentLoopBase = None


def _goal(fields: dict[str, Any]) -> str | None:
    extra = fields.get("extra_info") or {}
    goal = extra.get("goal") if isinstance(extra, dict) else None
    return goal or fields.get("goal")


def _extra_fields(rollout: Rollout) -> dict[str, Any]:
    """What the reward function reads, with the keys verl's own loops always set (issue 22: a
    batch mixing loops assembled None beside []): ``turn_scores`` is the user's rating of each
    rated policy turn on 0..1; there are no tools, so ``tool_rewards`` is empty."""
    return {
        "termination": rollout.termination,
        "satisfaction": rollout.satisfaction,
        "final_satisfaction": rollout.final_satisfaction,
        "policy_turns": rollout.policy_turns,
        "turn_scores": [(s - 1) / 4 for s in rollout.satisfaction if s is not None],
        "tool_rewards": [],
    }


if AgentLoopBase is not None:

    @register(AGENT_NAME)
    class _SimulatedUserAgentLoop(AgentLoopBase):  # type: ignore[misc]
        """Policy and simulated user take turns; one trajectory per sample."""

        async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> Any:
            rollout_config = self.config.actor_rollout_ref.rollout
            response_length = int(rollout_config.response_length)
            timing = {"generate_sequences": 0.0}
            started = time.perf_counter()
            simulator = SimulatorClient.from_env()
            try:
                rollout = await simulate_dialogue(
                    self._generator(sampling_params, timing),
                    ChatTokens(self.tokenizer, getattr(self, "apply_chat_template_kwargs", None)),
                    simulator,
                    list(kwargs["raw_prompt"]),
                    goal=_goal(kwargs),
                    max_turns=int(os.environ.get(ENV_MAX_TURNS, DEFAULT_MAX_TURNS)),
                    max_tokens=response_length,
                    max_prompt_tokens=int(rollout_config.prompt_length),
                )
            finally:
                await simulator.aclose()
            # The simulated user plays the part of verl's tools: its time is "tool_calls".
            timing["tool_calls"] = time.perf_counter() - started - timing["generate_sequences"]
            with_logprobs = sampling_params.get("logprobs")
            return AgentLoopOutput(
                prompt_ids=rollout.prompt_ids,
                response_ids=rollout.completion_ids[:response_length],
                response_mask=rollout.mask[:response_length],
                response_logprobs=rollout.logprobs[:response_length] if with_logprobs else None,
                num_turns=len(rollout.messages),
                metrics=timing,
                extra_fields=_extra_fields(rollout),
            )

        def _generator(self, sampling_params: dict[str, Any], timing: dict[str, float]) -> Any:
            """The policy through verl's server manager: one sticky request id per sample,
            the time spent counted as verl's ``generate_sequences`` metric."""
            request_id = uuid.uuid4().hex

            async def generate(
                ids: list[int], budget: int | None
            ) -> tuple[list[int], list[float] | None]:
                started = time.perf_counter()
                out = await self.server_manager.generate(
                    request_id=request_id, prompt_ids=ids, sampling_params=sampling_params
                )
                timing["generate_sequences"] += time.perf_counter() - started
                token_ids = list(getattr(out, "token_ids", out))  # older verl: a list of ids
                logprobs = getattr(out, "log_probs", None)
                return token_ids, None if logprobs is None else list(logprobs)

            return generate

    SimulatedUserAgentLoop: Any = _SimulatedUserAgentLoop
else:
    SimulatedUserAgentLoop = None
