"""The interactive-RL hooks against a real ``plaudit serve simulator`` (subprocess, the embedded
SmolLM2 as the simulated user) and the real SmolLM2 as the policy, each driven the way its
trainer drives it:

* verl: a stand-in of ``verl.experimental.agent_loop.agent_loop`` (``AgentLoopBase``,
  ``AgentLoopOutput``, ``register``) reproducing verl's calling convention at commit
  6c923f3b724ad8a3647e9fc818e485c078703d07: the loop is looked up by name in the registry,
  built with ``trainer_config``/``server_manager``/``tokenizer``/``processor`` and awaited as
  ``run(sampling_params, **dataset_fields)``; ``server_manager.generate`` answers token ids and
  log-probabilities;
* TRL 1.16: ``rollout_func(prompts, trainer)`` called by TRL's own ``GRPOTrainer`` for one
  training step (and directly with prompts repeated as TRL's sampler repeats them);
* OpenRLHF: see test_openrlhf_agent.py.
"""

from __future__ import annotations

import importlib
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from trainer_client.simulator import ChatTokens, _hf_generate, trl_rollout_func

pytestmark = pytest.mark.slow
GOAL = "You want to know how long to boil an egg so that the yolk stays soft."
PROMPT = [{"role": "user", "content": "How long should I boil an egg?"}]


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
            data_config: Any,
            **kw: Any,
        ) -> None:
            import asyncio

            self.config = trainer_config.config
            self.data_config = data_config.config
            self.apply_chat_template_kwargs = self.data_config.get("apply_chat_template_kwargs", {})
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


class _RecordingTokenizer:
    """The policy's tokenizer, recording the keyword arguments of apply_chat_template."""

    def __init__(self, tokenizer: Any) -> None:
        self._tokenizer = tokenizer
        self.template_kwargs: list[dict[str, Any]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tokenizer, name)

    def apply_chat_template(self, messages: Any, **kwargs: Any) -> Any:
        self.template_kwargs.append(kwargs)
        return self._tokenizer.apply_chat_template(messages, **kwargs)


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


def _stand_in_loop(
    monkeypatch: pytest.MonkeyPatch, config: dict[str, Any], **collaborators: Any
) -> Any:
    """The loop looked up in the stand-in's registry and built as verl builds it."""
    for name, module in _verl_stand_in().items():
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.delitem(sys.modules, "trainer_client.verl_agent", raising=False)
    agent_module = importlib.import_module("trainer_client.verl_agent")
    registry = sys.modules["verl.experimental.agent_loop.agent_loop"]._agent_loop_registry  # type: ignore[attr-defined]
    target = registry["plaudit_simulated_user"]["_target_"]
    module_name, _, class_name = target.rpartition(".")
    loop_class = getattr(importlib.import_module(module_name), class_name)
    assert loop_class is agent_module.SimulatedUserAgentLoop
    rollout = types.SimpleNamespace(**config["actor_rollout_ref"]["rollout"])
    return loop_class(
        trainer_config=types.SimpleNamespace(
            config=types.SimpleNamespace(actor_rollout_ref=types.SimpleNamespace(rollout=rollout))
        ),
        data_config=types.SimpleNamespace(config=config["data"]),
        **collaborators,
    )


def _real_verl_loop(
    monkeypatch: pytest.MonkeyPatch, config: dict[str, Any], **collaborators: Any
) -> Any:
    """The loop as verl 0.9.1's AgentLoopWorker builds it: looked up in verl's own registry and
    made by ``hydra.utils.instantiate`` with verl's own wrappers (run under the verl
    virtualenv, scripts/install_verl.sh; skipped elsewhere)."""
    agent_loop = pytest.importorskip(
        "verl.experimental.agent_loop.agent_loop", reason="verl is not installed here"
    )
    import hydra
    from omegaconf import OmegaConf

    monkeypatch.delitem(sys.modules, "trainer_client.verl_agent", raising=False)
    importlib.import_module("trainer_client.verl_agent")  # registers the loop with verl
    whole = OmegaConf.create(config)
    return hydra.utils.instantiate(
        config=agent_loop._agent_loop_registry["plaudit_simulated_user"],
        trainer_config=agent_loop.DictConfigWrap(config=whole),
        hf_model_type="llama",
        dataset_cls=None,
        data_config=agent_loop.DictConfigWrap(whole.data),
        tools=agent_loop.ToolListWrap([]),
        **collaborators,
    )


@pytest.mark.parametrize("verl", ["stand_in", "real"])
async def test_the_verl_agent_loop_runs_as_verl_runs_it(
    policy: Any, env: str, monkeypatch: pytest.MonkeyPatch, verl: str
) -> None:
    config = {
        "actor_rollout_ref": {"rollout": {"response_length": 256, "prompt_length": 12}},
        "data": {"apply_chat_template_kwargs": {"enable_thinking": False}},  # Qwen3's switch
    }
    manager = _ServerManager(policy)
    tokenizer = _RecordingTokenizer(policy.processing_class)
    collaborators = {"server_manager": manager, "tokenizer": tokenizer, "processor": None}
    if verl == "real":
        loop = _real_verl_loop(monkeypatch, config, **collaborators)
    else:
        loop = _stand_in_loop(monkeypatch, config, **collaborators)
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
    whole = ChatTokens(policy.processing_class).prompt(PROMPT)
    assert len(whole) > 12 and output.prompt_ids == whole[-12:], "capped as verl's loops cap"
    assert tokenizer.template_kwargs and all(
        kw.get("enable_thinking") is False for kw in tokenizer.template_kwargs
    ), "data.apply_chat_template_kwargs reach the chat template"
    rated = [(s - 1) / 4 for s in fields["satisfaction"] if s is not None]
    assert fields["turn_scores"] == pytest.approx(rated) and fields["tool_rewards"] == []
    metrics = output.metrics if isinstance(output.metrics, dict) else output.metrics.model_dump()
    assert metrics["generate_sequences"] > 0 and metrics["tool_calls"] > 0
    _check_trajectory(
        policy.processing_class, output.response_ids, output.response_mask, output.response_logprobs
    )
    if fields["policy_turns"] > 1:
        assert 0 in output.response_mask
    assert output.num_turns == 1 + 2 * fields["policy_turns"] - 1


# --- TRL --------------------------------------------------------------------------------


def _check_budget(tokenizer: Any, output: dict[str, list[Any]], limit: int) -> None:
    for ids, mask, logprobs in zip(
        output["completion_ids"], output["env_mask"], output["logprobs"], strict=True
    ):
        assert len(ids) <= limit, "the trajectory (policy and user tokens) fits the budget"
        _check_trajectory(tokenizer, ids, mask, logprobs)


def test_the_trl_rollout_func_gives_one_rollout_per_entry_within_the_budget(
    policy: Any, env: str
) -> None:
    """TRL passes the prompts already repeated num_generations times: one rollout each (issue
    22: two dialogues per entry crashed GRPO), never more than max_completion_length tokens."""
    trainer = types.SimpleNamespace(**vars(policy), num_generations=2)
    rollout_func = trl_rollout_func(max_turns=2, max_turn_tokens=12)
    goal = '{"goal": "You want a vegetarian lasagna recipe.", "prompt": "Dinner idea?"}'
    prompts = [goal, goal]  # as TRL's RepeatSampler hands them at G=2
    output = rollout_func(prompts, trainer)
    assert {"prompt_ids", "completion_ids", "logprobs"} <= output.keys()
    for key in ("completion_ids", "env_mask", "final_satisfaction", "termination"):
        assert len(output[key]) == len(prompts), "one rollout per entry"
    _check_budget(policy.processing_class, output, policy.args.max_completion_length)
    assert set(output["termination"]) <= {"user_done", "max_turns", "length"}
    rated = [s for s in output["final_satisfaction"] if s is not None]
    assert rated and all(1 <= s <= 5 for s in rated)


def test_one_real_grpo_step_with_the_rollout_func(
    policy: Any, env: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One step of TRL's own GRPOTrainer (SmolLM2 policy, G=2, a 48-token budget) with
    rollout_func=trl_rollout_func(), against the real simulator service."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM
    from trl import GRPOConfig, GRPOTrainer

    from trainer_client.simulator import satisfaction_reward

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    limit, seen = 48, []
    inner = trl_rollout_func(max_turns=3, max_turn_tokens=12)

    def rollout_func(prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
        output = inner(prompts, trainer)
        seen.append((list(prompts), output))
        return output

    def plain_len(completions: list[Any], **kwargs: Any) -> list[float]:
        return [float(len(str(c))) / 100 for c in completions]

    args = GRPOConfig(
        output_dir=str(tmp_path),
        max_steps=1,
        num_generations=2,
        per_device_train_batch_size=2,
        gradient_accumulation_steps=1,
        max_completion_length=limit,
        learning_rate=1e-6,
        use_cpu=True,
        bf16=False,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        disable_tqdm=True,
        seed=3,
    )
    trainer = GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(str(policy.model_dir)),  # trained: a copy
        processing_class=policy.processing_class,
        reward_funcs=[satisfaction_reward, plain_len],
        args=args,
        train_dataset=Dataset.from_list([{"prompt": PROMPT}] * 2),
        rollout_func=rollout_func,
    )
    trainer.train()
    assert len(seen) == 1
    prompts, output = seen[0]
    assert len(prompts) == 2 and prompts[0] == prompts[1] == PROMPT, "TRL repeats each prompt"
    assert len(output["completion_ids"]) == 2, "one rollout per entry"
    _check_budget(policy.processing_class, output, limit)
    assert any(0 in mask for mask in output["env_mask"]), "a user turn, masked out of the loss"
    logged = trainer.state.log_history[0]
    assert logged["completions/max_length"] <= limit  # TRL counts the policy's tokens only
    assert "rewards/satisfaction_reward/mean" in logged
