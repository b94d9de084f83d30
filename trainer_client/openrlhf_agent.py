"""An OpenRLHF agent whose environment is Plaudit's simulated user (``--train.agent_func_path``).

OpenRLHF (0.11.2; ``openrlhf/utils/agent.py`` and ``_load_agent_executor`` in
``openrlhf/trainer/ray/vllm_engine.py``) loads the file by path and requires it to define
``AgentExecutor``, a subclass of its ``AgentExecutorBase`` that it builds with no arguments
(issue 22). Here that is OpenRLHF's own ``MultiTurnAgentExecutor`` over :class:`AgentInstance`:
the executor calls ``reset({"observation": prompt, "label": label})`` once, then, after each
generated action, ``step({"observation_text", "action_text", "label", "sampling_params"})``,
which answers ``rewards`` (a tensor), ``scores``, ``environment_feedback`` (text appended after
the action: here the user's next turn in the chat template, tokens outside the action ranges
and so not trained on), ``done`` and ``extra_logs``. The executor sums ``rewards`` over the
steps and stops without another ``step`` once ``max_length`` tokens are used.

The reward is the simulated user's satisfaction with the policy's latest rated answer, mapped
onto 0..1. Each step gives the change since the previous rated answer, so the executor's sum is
that rating however the dialogue ends: the user ends it, ``PLAUDIT_SIMULATOR_MAX_TURNS`` policy
turns, or ``max_length`` cuts it before the user ends (issue 22: that got 0.0). A turn the user
could not rate keeps the previous rating (``extra_logs["plaudit/rated"]`` is 0 for it). A label
that is a JSON object with ``goal`` sets the user's goal. ``PLAUDIT_SIMULATOR_USER_TEMPLATE`` is
the text of a user turn after the policy's end-of-turn token (default ChatML, ``{content}`` for
the message). torch is imported inside ``step`` only. Without OpenRLHF installed the module
imports, and ``AgentExecutor`` is None.
"""

from __future__ import annotations

import json
import os
from typing import Any

from trainer_client.simulator import (
    CHATML_USER,
    DEFAULT_MAX_TURNS,
    SimulatorClient,
    UserTurn,
    chatml_messages,
    goal_of,
)

try:
    from openrlhf.utils.agent import AgentInstanceBase, MultiTurnAgentExecutor
except ImportError:  # OpenRLHF is not installed here
    MultiTurnAgentExecutor = None

    class AgentInstanceBase:  # type: ignore[no-redef]
        """The shape of OpenRLHF's base: ``reset(states)`` and ``step(states)``."""

        async def reset(self, states: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
            return states

        async def step(self, states: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
            raise NotImplementedError


def _label_goal(label: Any) -> str | None:
    if isinstance(label, dict):
        return label.get("goal")
    if isinstance(label, str):
        try:
            parsed = json.loads(label)
        except ValueError:
            return None
        return parsed.get("goal") if isinstance(parsed, dict) else None
    return None


class AgentInstance(AgentInstanceBase):  # type: ignore[misc]
    """One dialogue between the policy and the simulated user."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.max_turns = int(os.environ.get("PLAUDIT_SIMULATOR_MAX_TURNS", DEFAULT_MAX_TURNS))
        self.template = os.environ.get("PLAUDIT_SIMULATOR_USER_TEMPLATE", CHATML_USER)
        self.messages: list[dict[str, str]] = []
        self.goal = ""
        self.turns = 0
        self.reward = 0.0
        self.satisfaction: list[float | None] = []
        self.termination: str | None = None

    async def reset(self, states: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        prompt = str(states["observation"])
        found = chatml_messages(prompt)
        self.messages = [m for m in found if m["role"] in ("user", "assistant")]
        self.goal = goal_of(found, _label_goal(states.get("label")))
        self.turns, self.reward, self.satisfaction, self.termination = 0, 0.0, [], None
        return {"observation": prompt}

    async def step(self, states: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        import torch

        self.turns += 1
        self.messages.append({"role": "assistant", "content": str(states["action_text"]).strip()})
        said = await self._ask_user()
        self.satisfaction.append(said.satisfaction)
        done = said.done or self.turns >= self.max_turns
        if done:
            self.termination = "user_done" if said.done else "max_turns"
        else:
            self.messages.append({"role": "user", "content": said.text})
        before, self.reward = self.reward, self._rated(said.satisfaction)
        rated = float(said.satisfaction is not None)
        return {
            "rewards": torch.tensor(self.reward - before),
            "scores": torch.tensor(self.reward),
            "environment_feedback": "" if done else self.template.format(content=said.text),
            "done": done,
            "sampling_params": states.get("sampling_params"),
            "extra_logs": {
                "plaudit/satisfaction": torch.tensor(
                    float("nan") if said.satisfaction is None else said.satisfaction
                ),
                "plaudit/rated": torch.tensor(rated),
                "plaudit/user_done": torch.tensor(float(said.done)),
            },
        }

    async def _ask_user(self) -> UserTurn:
        client = SimulatorClient.from_env()
        try:
            return await client.turn(self.goal, self.messages, seed=self.turns)
        finally:
            await client.aclose()

    def _rated(self, satisfaction: float | None) -> float:
        """The latest rated answer's reward on 0..1 (the previous one when this is unrated)."""
        return self.reward if satisfaction is None else (satisfaction - 1) / 4


if MultiTurnAgentExecutor is not None:

    class _AgentExecutor(MultiTurnAgentExecutor):  # type: ignore[misc]
        """What ``--train.agent_func_path`` loads: OpenRLHF's multi-turn executor over
        :class:`AgentInstance`."""

        def __init__(self) -> None:
            super().__init__(AgentInstance)

    AgentExecutor: Any = _AgentExecutor
else:
    AgentExecutor = None
