"""Plaudit's OpenRLHF agent file driven by OpenRLHF's own code (0.11.2, installed without its
GPU dependencies by ``make install``: ``scripts/install_trainers.sh``): the file is loaded by
the body of OpenRLHF's ``_load_agent_executor`` (read from its ``vllm_engine.py``, whose module
imports vLLM and Ray), and OpenRLHF's ``MultiTurnAgentExecutor.execute`` runs the dialogue with
the real SmolLM2 as the policy behind a vLLM-shaped engine and the real simulator service."""

from __future__ import annotations

import ast
import importlib.util
import itertools
import json
import os
import types
from pathlib import Path
from typing import Any

import pytest

from trainer_client.simulator import _hf_generate

pytestmark = pytest.mark.slow
GOAL = "You want to know how long to boil an egg so that the yolk stays soft."
PROMPT = [{"role": "user", "content": "How long should I boil an egg?"}]
AGENT_FILE = Path(__file__).parents[3] / "trainer_client" / "openrlhf_agent.py"


@pytest.fixture(scope="module")
def openrlhf() -> types.ModuleType:
    """OpenRLHF's ``openrlhf.utils.agent`` (skips when OpenRLHF is not installed)."""
    return pytest.importorskip(
        "openrlhf.utils.agent",
        reason="OpenRLHF is not installed (scripts/install_trainers.sh installs it on CPU)",
    )


def _openrlhf_loader(agent_module: types.ModuleType) -> Any:
    """``_load_agent_executor`` as OpenRLHF defines it, compiled from its own source."""
    package = importlib.util.find_spec("openrlhf")
    assert package is not None and package.origin is not None
    source = Path(package.origin).parent / "trainer" / "ray" / "vllm_engine.py"
    tree = ast.parse(source.read_text())
    [node] = [n for n in tree.body if getattr(n, "name", "") == "_load_agent_executor"]
    namespace = {"AgentExecutorBase": agent_module.AgentExecutorBase}
    exec(compile(ast.Module(body=[node], type_ignores=[]), str(source), "exec"), namespace)
    return namespace["_load_agent_executor"]


class _Engine:
    """The part of OpenRLHF's vLLM engine an executor calls: ``generate(token_ids,
    sampling_params)`` answering vLLM's ``RequestOutput`` shape, from the real SmolLM2
    (turns of at most ``turn_tokens``)."""

    def __init__(self, policy: Any, turn_tokens: int) -> None:
        self.policy, self.turn_tokens, self.calls = policy, turn_tokens, 0

    async def generate(self, token_ids: list[int], params: Any, **kwargs: Any) -> Any:
        self.calls += 1
        cap = min(params.max_tokens, self.turn_tokens)
        ids, _ = _hf_generate(self.policy, list(token_ids), cap)
        tokenizer = self.policy.processing_class
        ended = bool(ids) and ids[-1] == tokenizer.eos_token_id
        output = types.SimpleNamespace(
            token_ids=ids,
            text=tokenizer.decode(ids, skip_special_tokens=True),
            finish_reason="stop" if ended else "length",
            logprobs=None,
        )
        return types.SimpleNamespace(outputs=[output])


def _prompt(policy: Any) -> str:
    tokenizer = policy.processing_class
    text: str = tokenizer.apply_chat_template(PROMPT, tokenize=False, add_generation_prompt=True)
    return text


def _prompt_length(policy: Any) -> int:
    return len(policy.processing_class(_prompt(policy), add_special_tokens=False)["input_ids"])


async def _execute(openrlhf: Any, policy: Any, max_length: int) -> dict[str, Any]:
    executor = _openrlhf_loader(openrlhf)(str(AGENT_FILE))
    engine = _Engine(policy, turn_tokens=12)
    params = types.SimpleNamespace(max_tokens=None, logprobs=None)
    response: dict[str, Any] = await executor.execute(
        _prompt(policy),
        json.dumps({"goal": GOAL}),
        params,
        max_length,
        policy.processing_class,
        engine,
    )
    return response


def _rated_reward(response: dict[str, Any]) -> float:
    satisfaction = float(response["extra_logs"]["plaudit/satisfaction"])
    assert satisfaction == satisfaction, "the simulated user rated the turn"
    return (satisfaction - 1) / 4


async def test_openrlhf_loads_the_agent_file(openrlhf: Any) -> None:
    executor = _openrlhf_loader(openrlhf)(str(AGENT_FILE))
    assert isinstance(executor, openrlhf.AgentExecutorBase)
    assert isinstance(executor, openrlhf.MultiTurnAgentExecutor)


async def test_a_dialogue_cut_by_max_length_gets_the_rated_turns_reward(
    openrlhf: Any, policy: Any, env: str
) -> None:
    """max_length leaves room for one 12-token answer: OpenRLHF stops after it without another
    step, before the user ends; the reward is the user's rating of that answer (issue 22: 0.0)."""
    response = await _execute(openrlhf, policy, max_length=_prompt_length(policy) + 12)
    assert len(response["action_ranges"]) == 1
    assert response["reward"] == pytest.approx(_rated_reward(response))
    assert float(response["scores"]) == pytest.approx(response["reward"])
    assert float(response["extra_logs"]["plaudit/user_done"]) in (0.0, 1.0)


async def test_a_multi_turn_dialogue_under_openrlhfs_executor(
    openrlhf: Any, policy: Any, env: str
) -> None:
    prompt_length = _prompt_length(policy)
    response = await _execute(openrlhf, policy, max_length=prompt_length + 100)
    ranges = response["action_ranges"]
    assert 1 <= len(ranges) <= int(os.environ["PLAUDIT_SIMULATOR_MAX_TURNS"])
    assert ranges[0][0] == prompt_length
    assert response["reward"] == pytest.approx(_rated_reward(response))
    text = policy.processing_class.decode(response["observation_tokens"])
    if len(ranges) > 1:  # the user's turns sit between the actions, outside their ranges
        assert "<|im_start|>user" in text[len(text) // 4 :]
        assert all(end < start for (_, end), (start, _) in itertools.pairwise(ranges))
