"""The interactive-RL hooks against a real ``plaudit serve simulator`` (subprocess, the embedded
SmolLM2 as the simulated user) and the real SmolLM2 as the policy, each driven the way its
trainer drives it:

* verl: a stand-in of ``verl.experimental.agent_loop.agent_loop`` (``AgentLoopBase``,
  ``AgentLoopOutput``, ``register``) reproducing verl's calling convention at commit
  6c923f3b724ad8a3647e9fc818e485c078703d07: the loop is looked up by name in the registry,
  built with ``trainer_config``/``server_manager``/``tokenizer``/``processor`` and awaited as
  ``run(sampling_params, **dataset_fields)``; ``server_manager.generate`` answers token ids and
  log-probabilities;
* TRL 1.16: ``rollout_func(prompts, trainer)`` as ``GRPOTrainer`` calls it, checked for the keys
  it requires and the ``env_mask`` it reads;
* OpenRLHF: ``reset`` then ``step`` per action, as ``AgentExecutorBase.execute`` calls them.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from tests.serving import serving
from trainer_client.simulator import ChatTokens, _hf_generate, trl_rollout_func

pytestmark = pytest.mark.slow
GOAL = "You want to know how long to boil an egg so that the yolk stays soft."
PROMPT = [{"role": "user", "content": "How long should I boil an egg?"}]


@pytest.fixture(scope="module")
def policy(model_cache_dir: Path) -> Any:
    """The policy: SmolLM2 as transformers loads it, with TRL-like ``args``."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from judges.backends.convert import resolve_model_dir

    model_dir = resolve_model_dir(None, model_cache_dir)
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    model = AutoModelForCausalLM.from_pretrained(str(model_dir)).eval()
    args = types.SimpleNamespace(max_completion_length=24, temperature=1.0)
    return types.SimpleNamespace(model=model, processing_class=tokenizer, args=args)


@pytest.fixture(scope="module")
def simulator_url(tmp_path_factory: pytest.TempPathFactory, model_cache_dir: Path) -> Iterator[str]:
    root = tmp_path_factory.mktemp("sim-server")
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("PLAUDIT_")},
        "HOME": str(root),
        "PLAUDIT_DATA_DIR": str(root / "data"),
        "PLAUDIT_MODEL_CACHE_DIR": str(model_cache_dir),
        "PLAUDIT_SIMULATOR_MAX_NEW_TOKENS": "16",
        "OMP_NUM_THREADS": "1",
    }
    with serving("simulator", root, env, within=240) as url:
        yield url


@pytest.fixture
def env(simulator_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("PLAUDIT_URL", simulator_url)
    monkeypatch.setenv("PLAUDIT_SIMULATOR_MAX_TURNS", "3")
    monkeypatch.setenv("PLAUDIT_SIMULATOR_TEMPERATURE", "0.7")
    return simulator_url


def test_user_turns_are_the_chat_template_between_policy_turns(policy: Any) -> None:
    tokenizer = policy.processing_class
    tokens = ChatTokens(tokenizer)
    answer = [*tokenizer.encode("Ten minutes.", add_special_tokens=False), tokenizer.eos_token_id]
    user = tokens.user_turn("Is that for a soft yolk?", answer)
    rebuilt = tokenizer.decode(tokens.prompt(PROMPT) + answer + user)
    expected = tokenizer.apply_chat_template(
        [
            *PROMPT,
            {"role": "assistant", "content": "Ten minutes."},
            {"role": "user", "content": "Is that for a soft yolk?"},
        ],
        tokenize=False,
        add_generation_prompt=True,
    )
    assert rebuilt == expected


def _check_trajectory(
    tokenizer: Any, ids: list[int], mask: list[int], logprobs: list[float] | None
) -> None:
    assert len(ids) == len(mask) and ids
    assert mask[0] == 1, "the trajectory starts with the policy's answer"
    if logprobs is not None:
        assert len(logprobs) == len(ids)
        assert all(lp <= 0 for lp, m in zip(logprobs, mask, strict=True) if m == 1)
        assert all(lp == 0 for lp, m in zip(logprobs, mask, strict=True) if m == 0)
    if 0 in mask:  # the user's tokens are a chat-template user turn, never trained on
        user = [t for t, m in zip(ids, mask, strict=True) if m == 0]
        assert "user" in tokenizer.decode(user)


# --- verl -------------------------------------------------------------------------------


class _TokenOutput(BaseModel):
    token_ids: list[int]
    log_probs: list[float] | None = None


def _verl_stand_in() -> dict[str, types.ModuleType]:
    """``verl.experimental.agent_loop.agent_loop`` as far as an agent loop sees it."""
    module = types.ModuleType("verl.experimental.agent_loop.agent_loop")
    registry: dict[str, dict[str, str]] = {}

    class AgentLoopOutput(BaseModel):
        prompt_ids: list[int]
        response_ids: list[int]
        response_mask: list[int]
        response_logprobs: list[float] | None = None
        multi_modal_data: dict[str, Any] | None = None
        reward_score: float | None = None
        num_turns: int = 0
        metrics: dict[str, float]
        extra_fields: dict[str, Any] = {}

    class AgentLoopBase:
        def __init__(
            self,
            trainer_config: Any,
            server_manager: Any,
            tokenizer: Any,
            processor: Any,
            **kw: Any,
        ) -> None:
            import asyncio

            self.config = trainer_config.config
            self.server_manager = server_manager
            self.tokenizer = tokenizer
            self.processor = processor
            self.loop = asyncio.get_running_loop()

    def register(agent_name: str) -> Any:
        def decorator(subclass: type) -> type:
            registry[agent_name] = {"_target_": f"{subclass.__module__}.{subclass.__qualname__}"}
            return subclass

        return decorator

    module.AgentLoopBase = AgentLoopBase  # type: ignore[attr-defined]
    module.AgentLoopOutput = AgentLoopOutput  # type: ignore[attr-defined]
    module.register = register  # type: ignore[attr-defined]
    module._agent_loop_registry = registry  # type: ignore[attr-defined]
    names = ["verl", "verl.experimental", "verl.experimental.agent_loop"]
    modules = {name: types.ModuleType(name) for name in names}
    modules[module.__name__] = module
    return modules


class _ServerManager:
    """verl's AsyncLLMServerManager seen from a loop: generate(request_id, *, prompt_ids,
    sampling_params) -> TokenOutput."""

    def __init__(self, policy: Any) -> None:
        self.policy = policy
        self.calls: list[tuple[str, int]] = []

    async def generate(
        self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any]
    ) -> _TokenOutput:
        self.calls.append((request_id, len(prompt_ids)))
        ids, logprobs = _hf_generate(self.policy, prompt_ids)
        return _TokenOutput(token_ids=ids, log_probs=logprobs)


async def test_the_verl_agent_loop_runs_as_verl_runs_it(
    policy: Any, env: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, module in _verl_stand_in().items():
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.delitem(sys.modules, "trainer_client.verl_agent", raising=False)
    agent_module = importlib.import_module("trainer_client.verl_agent")
    registry = sys.modules["verl.experimental.agent_loop.agent_loop"]._agent_loop_registry  # type: ignore[attr-defined]
    target = registry["plaudit_simulated_user"]["_target_"]
    module_name, _, class_name = target.rpartition(".")
    loop_class = getattr(importlib.import_module(module_name), class_name)
    assert loop_class is agent_module.SimulatedUserAgentLoop

    config = types.SimpleNamespace(
        actor_rollout_ref=types.SimpleNamespace(
            rollout=types.SimpleNamespace(response_length=256, prompt_length=128)
        )
    )
    manager = _ServerManager(policy)
    loop = loop_class(
        trainer_config=types.SimpleNamespace(config=config),
        server_manager=manager,
        tokenizer=policy.processing_class,
        processor=None,
    )
    output = await loop.run(
        {"temperature": 1.0, "top_p": 1.0, "logprobs": True},
        raw_prompt=PROMPT,
        extra_info={"goal": GOAL},
        index=0,
    )
    fields = output.extra_fields
    assert fields["termination"] in ("user_done", "max_turns", "length")
    assert (
        1 <= fields["policy_turns"] <= 3 == len(manager.calls)
        or fields["termination"] != "max_turns"
    )
    assert len({request for request, _ in manager.calls}) == 1, "one sticky session per sample"
    assert len(fields["satisfaction"]) == fields["policy_turns"]
    assert all(s is None or 1 <= s <= 5 for s in fields["satisfaction"])
    assert output.prompt_ids == ChatTokens(policy.processing_class).prompt(PROMPT)
    _check_trajectory(
        policy.processing_class, output.response_ids, output.response_mask, output.response_logprobs
    )
    if fields["policy_turns"] > 1:
        assert 0 in output.response_mask
    assert output.num_turns == 1 + 2 * fields["policy_turns"] - 1


# --- TRL --------------------------------------------------------------------------------


def test_the_trl_rollout_func_returns_what_grpo_reads(policy: Any, env: str) -> None:
    trainer = types.SimpleNamespace(**vars(policy), num_generations=2)
    rollout_func = trl_rollout_func(max_turns=2)
    prompts = [
        PROMPT,
        '{"goal": "You want a vegetarian lasagna recipe.", "prompt": "Dinner idea?"}',
    ]
    output = rollout_func(prompts, trainer)
    assert {"prompt_ids", "completion_ids", "logprobs"} <= output.keys()
    assert len(output["completion_ids"]) == 4, "num_generations per prompt"
    for key in ("env_mask", "final_satisfaction", "termination", "policy_turns"):
        assert len(output[key]) == 4
    for ids, mask, logprobs in zip(
        output["completion_ids"], output["env_mask"], output["logprobs"], strict=True
    ):
        _check_trajectory(policy.processing_class, ids, mask, logprobs)
    assert set(output["termination"]) <= {"user_done", "max_turns", "length"}
    rated = [s for s in output["final_satisfaction"] if s is not None]
    assert rated and all(1 <= s <= 5 for s in rated)


# --- OpenRLHF ---------------------------------------------------------------------------


async def test_the_openrlhf_agent_follows_the_executor_protocol(policy: Any, env: str) -> None:
    from trainer_client.openrlhf_agent import AgentInstance

    tokenizer = policy.processing_class
    prompt = tokenizer.apply_chat_template(PROMPT, tokenize=False, add_generation_prompt=True)
    agent = AgentInstance()
    reset = await agent.reset({"observation": prompt, "label": json.dumps({"goal": GOAL})})
    observation = reset["observation"]
    tokens = tokenizer(observation, add_special_tokens=False)["input_ids"]
    action_ranges, total, done, steps = [], 0.0, False, 0
    while not done and steps < 5:
        action, _ = _hf_generate(policy, tokens)
        action_text = tokenizer.decode(action, skip_special_tokens=True)
        action_ranges.append((len(tokens), len(tokens) + len(action)))
        result = await agent.step(
            {
                "observation_text": observation,
                "action_text": action_text,
                "label": None,
                "sampling_params": None,
            }
        )
        total += result["rewards"].item()
        done = result["done"]
        feedback = result["environment_feedback"]
        observation = observation + action_text + feedback
        tokens = tokens + action + tokenizer(feedback, add_special_tokens=False)["input_ids"]
        steps += 1
    assert done and agent.termination in ("user_done", "max_turns") and steps <= 3
    assert agent.goal == GOAL
    final = agent.satisfaction[-1]
    assert final is None or total == pytest.approx((final - 1) / 4)
    assert len(agent.satisfaction) == steps
    if steps > 1:
        assert "<|im_start|>user" in observation
