"""An OpenRLHF agent whose environment is Plaudit's simulated user (``--agent_func_path``).

OpenRLHF's agent executor (``openrlhf/utils/agent.py`` at OpenRLHF/OpenRLHF commit
f5b3f08a05fd6cbd9a5b712ed931bbb72c24f2c4) creates one ``AgentInstance`` per prompt, calls
``reset({"observation": prompt, "label": label})`` and then, after each generated action,
``step({"observation_text", "action_text", "label", "sampling_params"})``, which answers
``rewards`` (a tensor), ``scores``, ``environment_feedback`` (text appended after the action:
here the user's next turn in the chat template, tokens that are not in the action ranges and
so not trained on), ``done`` and ``extra_logs``.

The reward is the simulated user's satisfaction with the policy's last answer, mapped onto
0..1, given once when the dialogue ends (the user ends it, or ``PLAUDIT_SIMULATOR_MAX_TURNS``
policy turns); earlier steps get 0. A label that is a JSON object with ``goal`` sets the
user's goal. ``PLAUDIT_SIMULATOR_USER_TEMPLATE`` is the text of a user turn after the
policy's end-of-turn token (default ChatML, ``{content}`` for the message). torch is imported
inside ``step`` only.
"""

from __future__ import annotations

import json
import os
from typing import Any

from trainer_client.simulator import (
    CHATML_USER,
    DEFAULT_MAX_TURNS,
    SimulatorClient,
    chatml_messages,
    goal_of,
)

try:
    from openrlhf.utils.agent import AgentInstanceBase
except ImportError:  # OpenRLHF (with ray and vLLM) is not installed here

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
        self.satisfaction: list[float | None] = []
        self.termination: str | None = None

    async def reset(self, states: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        prompt = str(states["observation"])
        found = chatml_messages(prompt)
        self.messages = [m for m in found if m["role"] in ("user", "assistant")]
        self.goal = goal_of(found, _label_goal(states.get("label")))
        self.turns, self.satisfaction, self.termination = 0, [], None
        return {"observation": prompt}

    async def step(self, states: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        import torch

        self.turns += 1
        self.messages.append({"role": "assistant", "content": str(states["action_text"]).strip()})
        client = SimulatorClient.from_env()
        try:
            said = await client.turn(self.goal, self.messages, seed=self.turns)
        finally:
            await client.aclose()
        self.satisfaction.append(said.satisfaction)
        done = said.done or self.turns >= self.max_turns
        if done:
            self.termination = "user_done" if said.done else "max_turns"
        reward = 0.0
        if done and said.satisfaction is not None:
            reward = (said.satisfaction - 1) / 4
        feedback = "" if done else self.template.format(content=said.text)
        if not done:
            self.messages.append({"role": "user", "content": said.text})
        return {
            "rewards": torch.tensor(reward),
            "scores": torch.tensor(reward),
            "environment_feedback": feedback,
            "done": done,
            "sampling_params": states.get("sampling_params"),
            "extra_logs": {
                "plaudit/satisfaction": torch.tensor(
                    float("nan") if said.satisfaction is None else said.satisfaction
                ),
                "plaudit/user_done": torch.tensor(float(said.done)),
            },
        }
