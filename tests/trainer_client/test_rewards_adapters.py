"""The rewards endpoints and the trainer adapters against a real ``plaudit serve all`` over TCP,
with the real MiniLM embedder (``diversity``) and SmolLM2 judge (``judge_scale``)."""

from __future__ import annotations

import asyncio
import importlib.util
import inspect
import json
import logging
import pickle
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

import trainer_client.openrlhf
import trainer_client.verl
from tests.serving import free_port
from tests.trainer_client.conftest import JUDGE_MAX_INPUT_TOKENS, LiveServer
from trainer_client import (
    AsyncPlauditClient,
    InvalidRequest,
    PlauditClient,
    PlauditConnectionError,
    PlauditError,
    RetryPolicy,
    RewardUnavailable,
    plaudit_reward_func,
)
from trainer_client._scorer import ClientConfig, GroupScorer

pytestmark = pytest.mark.slow

DIVERSITY = {"channels": {"diversity": {"weight": 1.0}}}
JUDGE = {"channels": {"judge_scale": {"weight": 1.0, "k": 5}}}
BOTH = {"channels": {"diversity": {"weight": 0.5}, "judge_scale": {"weight": 1.0, "k": 5}}}
#: Far over the fixture judge's input limit: its judge_scale grade fails as ``invalid``.
TOO_LONG = "word " * (4 * JUDGE_MAX_INPUT_TOKENS)

NO_RETRY = RetryPolicy(max_retries=0)

PROMPTS = ["Name a prime number."] * 3 + ["Name a colour."] * 3
COMPLETIONS = ["7", "9 is prime", "Two.", "Blue.", "A cat sat on the mat.", "Red"]


def _run_id() -> str:
    return f"adapters {uuid.uuid4().hex[:8]}/#"  # a space, a slash and a hash: quoted in paths


def _reward(server: LiveServer, spec: dict[str, Any], **kwargs: Any) -> Any:
    return plaudit_reward_func(server.url, spec, api_key=server.reward_key, **kwargs)


class Recorder:
    """Stands in for TRL's ``log_metric`` and ``log_extra`` hooks."""

    def __init__(self) -> None:
        self.metrics: dict[str, list[float]] = {}
        self.extra: dict[str, list[Any]] = {}

    def log_metric(self, name: str, value: float) -> None:
        self.metrics.setdefault(name, []).append(value)

    def log_extra(self, column: str, values: list[Any]) -> None:
        self.extra.setdefault(column, []).extend(values)


def _trl_kwargs(recorder: Recorder, step: int, size: int) -> dict[str, Any]:
    """What GRPOTrainer._calculate_rewards passes besides prompts and completions."""
    return {
        "completion_ids": [[1] * (i + 1) for i in range(size)],
        "trainer_state": SimpleNamespace(global_step=step),
        "log_metric": recorder.log_metric,
        "log_extra": recorder.log_extra,
        "ground_truth": ["x"] * size,  # a dataset column, passed through by TRL
    }


# --- the client methods ------------------------------------------------------------------------


def test_rewards_group_validate_and_runs(live_all_server: LiveServer) -> None:
    run_id = _run_id()
    with PlauditClient(live_all_server.url, api_key=live_all_server.reward_key) as client:
        out = client.rewards_group(
            "Name a prime number.",
            ["7", {"id": "b", "text": "9"}, "2"],
            DIVERSITY,
            run_id=run_id,
            step=3,
            token_counts=[1, 1, 1],
            finish_reasons=["stop", "length", None],
            id="g-1",
        )
        client.rewards_group("Name a colour.", ["Blue.", "Red."], DIVERSITY, run_id=run_id, step=4)
        valid = client.rewards_validate(BOTH)
        invalid = client.rewards_validate({"channels": {"nope": {}}})
        step_three = client.reward_runs(run_id, step=3)
        first = client.reward_runs(run_id, limit=1)
        rest = client.reward_runs(run_id, limit=1, offset=1)
        with pytest.raises(InvalidRequest) as caught:
            client.rewards_group("p", ["a", "b"], {"channels": {"nope": {}}})
    assert out["kind"] == "rewards" and out["id"] == "g-1"
    assert [r["id"] for r in out["results"]] == ["c0", "b", "c2"]
    assert all(r["status"] == "ok" and 0.0 <= r["total"] <= 1.0 for r in out["results"])
    assert valid["valid"] is True and valid["spec"]["channels"]["judge_scale"]["k"] == 5
    assert valid["spec_hash"]
    assert invalid["valid"] is False and invalid["errors"][0]["param"] == "spec.channels.nope"
    assert [g["step"] for g in step_three["items"]] == [3]
    assert step_three["items"][0]["result"]["spec_hash"] == out["spec_hash"]
    assert first["total"] == rest["total"] == 2
    assert [g["step"] for g in first["items"] + rest["items"]] == [3, 4]
    assert caught.value.param == "spec.channels.nope"


async def test_async_rewards_methods(live_all_server: LiveServer) -> None:
    run_id = _run_id()
    url, key = live_all_server.url, live_all_server.reward_key
    async with AsyncPlauditClient(url, api_key=key) as client:
        outs = await asyncio.gather(
            client.rewards_group("Q1", ["a cat", "a dog"], DIVERSITY, run_id=run_id, step=0),
            client.rewards_group("Q2", ["stocks", "bonds"], DIVERSITY, run_id=run_id, step=1),
        )
        valid = await client.rewards_validate(DIVERSITY)
        page = await client.reward_runs(run_id)
    assert [len(o["results"]) for o in outs] == [2, 2]
    assert valid["valid"] is True
    assert sorted(g["step"] for g in page["items"]) == [0, 1]


# --- TRL ---------------------------------------------------------------------------------------


def test_scorer_learns_group_channels_from_the_server(live_all_server: LiveServer) -> None:
    config = ClientConfig(live_all_server.url, live_all_server.reward_key)
    mixed = GroupScorer(config, {"channels": {"judge_scale": {}, "diversity": {}}})
    assert mixed.group_channels() == ["diversity"]
    assert GroupScorer(config, {"channels": {"judge_scale": {}}}).group_channels() == []
    with pytest.raises(ValueError, match=r"spec\.channels\.nope"):
        GroupScorer(config, {"channels": {"nope": {}}}).group_channels()


def test_trl_standard_completions_one_request_per_group(live_all_server: LiveServer) -> None:
    run_id = _run_id()
    reward = _reward(live_all_server, DIVERSITY, run_id=run_id, num_generations=3)
    recorder = Recorder()
    rewards = reward(
        prompts=PROMPTS, completions=COMPLETIONS, **_trl_kwargs(recorder, 5, len(PROMPTS))
    )
    assert reward.__name__ == "plaudit"
    assert len(rewards) == 6 and all(isinstance(r, float) for r in rewards)
    with PlauditClient(live_all_server.url, api_key=live_all_server.reward_key) as client:
        stored = client.reward_runs(run_id)["items"]
    # One request per prompt, tagged with the step being computed: global_step 5 done, step 6.
    assert [g["step"] for g in stored] == [6, 6]
    stored_totals = {
        tuple(r["total"] for r in g["result"]["results"]) for g in stored
    }  # the two groups may be stored in either order (they are sent concurrently)
    assert stored_totals == {tuple(rewards[:3]), tuple(rewards[3:])}
    assert recorder.extra["plaudit/diversity"] == rewards  # weight 1: the value is the total
    assert recorder.metrics["plaudit/channels/diversity"] == [pytest.approx(sum(rewards) / 6)]


def test_trl_conversational_completions_with_the_judge(live_all_server: LiveServer) -> None:
    prompt = [
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": "What is the capital of France?"},
    ]
    completions = [
        [{"role": "assistant", "content": "Paris."}],
        [{"role": "assistant", "content": "Berlin."}],
        [{"role": "assistant", "content": "I like turtles."}],
    ]
    recorder = Recorder()
    reward = _reward(live_all_server, BOTH, name="plaudit_judge")
    rewards = reward(prompts=[prompt] * 3, completions=completions, **_trl_kwargs(recorder, 0, 3))
    assert len(rewards) == 3 and all(isinstance(r, float) for r in rewards)
    scale, diversity = (
        recorder.extra["plaudit_judge/judge_scale"],
        recorder.extra["plaudit_judge/diversity"],
    )
    assert all(1.0 <= s <= 5.0 for s in scale)
    assert rewards == [pytest.approx(s + 0.5 * d) for s, d in zip(scale, diversity, strict=True)]
    assert set(recorder.metrics) == {
        "plaudit_judge/channels/judge_scale",
        "plaudit_judge/channels/diversity",
    }


def test_trl_gives_none_to_what_could_not_be_scored(
    live_all_server: LiveServer, caplog: pytest.LogCaptureFixture
) -> None:
    judge = _reward(live_all_server, JUDGE)
    rewards = judge(prompts=["2+2?"] * 3, completions=["4", TOO_LONG, "5"])
    assert rewards[1] is None
    assert isinstance(rewards[0], float) and isinstance(rewards[2], float)

    # A group split across processes: this process holds one completion of "Name a colour.",
    # which a diversity channel cannot compare with anything.
    diversity = _reward(live_all_server, DIVERSITY, num_generations=3)
    with caplog.at_level(logging.WARNING, logger="trainer_client.rewards"):
        split = diversity(prompts=PROMPTS[:4], completions=COMPLETIONS[:4])
    assert split[3] is None and all(isinstance(r, float) for r in split[:3])
    assert "cannot be scored by diversity" in caplog.text
    assert "fewer or more than num_generations=3" in caplog.text


def test_trl_unreachable_server_raises_or_gives_none() -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    loud = plaudit_reward_func(url, DIVERSITY, retry=NO_RETRY)
    with pytest.raises(PlauditConnectionError):
        loud(prompts=PROMPTS, completions=COMPLETIONS)
    lenient = plaudit_reward_func(url, DIVERSITY, retry=NO_RETRY, on_error="none")
    assert lenient(prompts=PROMPTS, completions=COMPLETIONS) == [None] * 6


def test_trl_group_the_wire_model_refuses_is_never_sent() -> None:
    # The adapter builds the server's own RewardsGroupRequest, so a group the server would
    # refuse (here a run id over 200 characters) fails in the client, before any connection:
    # nothing listens at this address, yet the error is InvalidRequest, not a connection error.
    url = f"http://127.0.0.1:{free_port()}"
    for on_error in ("raise", "none"):
        reward = plaudit_reward_func(
            url, DIVERSITY, run_id="r" * 201, retry=NO_RETRY, on_error=on_error
        )
        with pytest.raises(InvalidRequest, match="run_id"):
            reward(prompts=PROMPTS, completions=COMPLETIONS)


def test_trl_rejected_spec_always_raises(live_all_server: LiveServer) -> None:
    bad = _reward(live_all_server, {"channels": {"nope": {}}}, on_error="none")
    with pytest.raises(InvalidRequest) as caught:
        bad(prompts=PROMPTS, completions=COMPLETIONS)
    assert caught.value.param == "spec.channels.nope"
    assert bad.validate()["valid"] is False


def test_trl_reward_survives_pickling_after_use(live_all_server: LiveServer) -> None:
    reward = _reward(live_all_server, DIVERSITY, name="div")
    before = reward(prompts=PROMPTS, completions=COMPLETIONS)
    copy = pickle.loads(pickle.dumps(reward))
    assert copy.__name__ == "div" and copy.scorer.client() is not reward.scorer.client()
    assert copy(prompts=PROMPTS, completions=COMPLETIONS) == pytest.approx(before)
    assert copy.validate()["valid"] is True
    reward.close()
    copy.close()


async def test_trl_async_variant(live_all_server: LiveServer) -> None:
    reward = _reward(live_all_server, DIVERSITY, asynchronous=True)
    assert inspect.iscoroutinefunction(reward) and reward.__name__ == "plaudit"
    recorder = Recorder()
    rewards = await reward(
        prompts=PROMPTS, completions=COMPLETIONS, **_trl_kwargs(recorder, 2, len(PROMPTS))
    )
    sync_rewards = reward.reward(prompts=PROMPTS, completions=COMPLETIONS)
    assert rewards == pytest.approx(sync_rewards)
    assert recorder.extra["plaudit/diversity"] == rewards
    copy = pickle.loads(pickle.dumps(reward))
    assert await copy(prompts=PROMPTS, completions=COMPLETIONS) == pytest.approx(rewards)


# --- verl --------------------------------------------------------------------------------------


def _load_by_path(module: ModuleType, name: str) -> ModuleType:
    """Load a module from its file, as verl and OpenRLHF load reward functions."""
    spec = importlib.util.spec_from_file_location(name, module.__file__ or "")
    assert spec is not None and spec.loader is not None
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded


@pytest.fixture
def plaudit_env(
    live_all_server: LiveServer, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[[dict[str, Any]], None]]:
    """Sets the PLAUDIT_* variables the file-loaded adapters read; returns a spec setter."""
    monkeypatch.setenv("PLAUDIT_URL", live_all_server.url)
    monkeypatch.setenv("PLAUDIT_API_KEY", live_all_server.reward_key)
    monkeypatch.delenv("PLAUDIT_PROMPT_KEY", raising=False)

    def use(spec: dict[str, Any]) -> None:
        monkeypatch.setenv("PLAUDIT_REWARD_SPEC", json.dumps(spec))

    yield use


def test_verl_compute_score_loaded_by_path(
    live_all_server: LiveServer,
    plaudit_env: Callable[[dict[str, Any]], None],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(JUDGE))
    monkeypatch.setenv("PLAUDIT_REWARD_SPEC", str(spec_file))
    run_id = _run_id()
    monkeypatch.setenv("PLAUDIT_RUN_ID", run_id)
    verl = _load_by_path(trainer_client.verl, "custom_module")
    info = {"question": "What is 2 + 2?", "split": "train", "index": 0}
    result = verl.compute_score("gsm8k", "The answer is 4.", "4", info)
    assert set(result) == {"score", "judge_scale", "plaudit_failed"}
    assert 1.0 <= result["score"] <= 5.0 and result["score"] == result["judge_scale"]
    assert result["plaudit_failed"] == 0.0
    # A batch where one completion fails: every dict has the same keys (verl gathers them
    # across the batch), the failed one flagged with its group's mean ok total.
    batch = verl.compute_score_batch(["gsm8k"] * 2, ["4", TOO_LONG], ["4"] * 2, [info] * 2)
    assert [set(r) for r in batch] == [{"score", "judge_scale", "plaudit_failed"}] * 2
    assert [r["plaudit_failed"] for r in batch] == [0.0, 1.0]
    assert batch[1]["score"] == batch[0]["score"], "the group's mean ok total: zero advantage"
    monkeypatch.setenv("PLAUDIT_VERL_ON_FAILURE", "raise")
    with pytest.raises(RewardUnavailable) as caught:
        verl.compute_score_batch(["gsm8k"] * 2, ["4", TOO_LONG], ["4"] * 2, [info] * 2)
    assert caught.value.status == "invalid" and caught.value.index == 1
    with pytest.raises(ValueError, match="verl passes no prompt"):
        verl.compute_score("gsm8k", "4", "4", {"split": "train"})
    monkeypatch.delenv("PLAUDIT_VERL_ON_FAILURE")
    # A row without a prompt is marked, since verl's reward loop cannot assemble a dict
    # without "score" (issue 22; tests/trainer_client/test_verl_ray.py drives verl itself).
    no_prompt = verl.compute_score("gsm8k", "4", "4", {"split": "train"})
    assert no_prompt == {"score": 3.0, "judge_scale": 3.0, "plaudit_failed": 1.0}
    mixed = verl.compute_score_batch(["gsm8k"] * 3, ["4", "5", "4"], None, [info, info, {}])
    assert [r["plaudit_failed"] for r in mixed] == [0.0, 0.0, 1.0] and mixed[2]["score"] == 3.0
    nested = {"interaction_kwargs": {"query": "2+2?"}}  # verl's multi-turn gsm8k rows
    assert verl.compute_score("gsm8k", "4", "4", nested)["plaudit_failed"] == 0.0
    monkeypatch.setenv("PLAUDIT_PROMPT_KEY", "task.text")
    assert verl.compute_score("gsm8k", "4", "4", {"task": {"text": "2+2?"}})["score"] >= 1.0
    with PlauditClient(live_all_server.url, api_key=live_all_server.reward_key) as client:
        stored = client.reward_runs(run_id)["items"]
    assert len(stored) == 6  # every request that reached the server, the failed ones too
    # A group of one whose only completion fails: the judge service answers 503 (nothing could
    # be judged). Under verl's reward loop a raise would leave the dict without "score", so
    # it is marked (the middle of judge_scale's 1..5) unless raising is asked for.
    monkeypatch.delenv("PLAUDIT_PROMPT_KEY")
    config = ClientConfig(live_all_server.url, live_all_server.reward_key, retry=NO_RETRY)
    verl.configure(GroupScorer(config, JUDGE))
    lone = verl.compute_score("gsm8k", TOO_LONG, "4", info)
    assert lone == {"score": 3.0, "judge_scale": 3.0, "plaudit_failed": 1.0}
    monkeypatch.setenv("PLAUDIT_VERL_ON_FAILURE", "raise")
    with pytest.raises(PlauditError):
        verl.compute_score("gsm8k", TOO_LONG, "4", info)
    verl.reset()


async def test_verl_compute_score_async(plaudit_env: Callable[[dict[str, Any]], None]) -> None:
    plaudit_env(JUDGE)
    trainer_client.verl.reset()
    info = {"prompt": "Name a prime number."}
    results = await asyncio.gather(
        trainer_client.verl.compute_score_async("src", "7", None, info),
        trainer_client.verl.compute_score_async("src", "9", None, info),
    )
    assert all(set(r) == {"score", "judge_scale", "plaudit_failed"} for r in results)
    plaudit_env(DIVERSITY)
    trainer_client.verl.reset()
    with pytest.raises(ValueError, match="compute_score_batch"):
        await trainer_client.verl.compute_score_async("src", "7", None, info)
    trainer_client.verl.reset()


def test_verl_compute_score_batch_groups_by_prompt(
    plaudit_env: Callable[[dict[str, Any]], None],
) -> None:
    plaudit_env(DIVERSITY)
    trainer_client.verl.reset()
    infos = [{"question": p} for p in PROMPTS]
    results = trainer_client.verl.compute_score_batch(["src"] * 6, COMPLETIONS, ["x"] * 6, infos)
    assert [set(r) for r in results] == [{"score", "diversity", "plaudit_failed"}] * 6
    assert all(0.0 <= r["score"] <= 1.0 for r in results)
    assert max(r["score"] for r in results[:3]) == pytest.approx(1.0)  # min-max per group
    with pytest.raises(ValueError, match="has one completion in this batch"):
        trainer_client.verl.compute_score_batch(["src"] * 4, COMPLETIONS[:4], None, infos[:4])
    trainer_client.verl.reset()


# --- OpenRLHF ----------------------------------------------------------------------------------


def test_openrlhf_reward_func_loaded_by_path(
    plaudit_env: Callable[[dict[str, Any]], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    torch = pytest.importorskip("torch")
    plaudit_env(BOTH)
    module = _load_by_path(trainer_client.openrlhf, "reward_func")
    prompts = ["<|user|>Name a prime number.<|assistant|>"] * 2 + ["<|user|>Name a colour."] * 2
    responses = ["7", "9 is prime", "Blue.", "I like turtles."]
    queries = [p + r + "<|im_end|>" for p, r in zip(prompts, responses, strict=True)]
    # OpenRLHF at HEAD calls the file one sample at a time: a group spec is refused at once,
    # whatever the call holds, with the route that works.
    with pytest.raises(ValueError, match=r"get_reward\?group_size=N"):
        module.reward_func(queries, prompts, ["7", "7", "blue", "blue"])
    monkeypatch.setenv("PLAUDIT_OPENRLHF_WHOLE_GROUPS", "true")
    out = module.reward_func(queries, prompts, ["7", "7", "blue", "blue"])
    assert set(out) == {"rewards", "scores", "extra_logs"}
    assert isinstance(out["rewards"], torch.Tensor) and out["rewards"].shape == (4,)
    logs = out["extra_logs"]
    assert set(logs) == {"plaudit/diversity", "plaudit/judge_scale"}
    expected = logs["plaudit/judge_scale"] + 0.5 * logs["plaudit/diversity"]
    assert torch.allclose(out["rewards"], expected)
    # scores: each channel on 0..1 by its range (judge_scale k=5: 1..5), weighted (1, 0.5).
    units = ((logs["plaudit/judge_scale"] - 1) / 4 + 0.5 * logs["plaudit/diversity"]) / 1.5
    assert torch.allclose(out["scores"], units)
    assert bool(((out["scores"] >= 0) & (out["scores"] <= 1)).all())
    # The end-of-turn token is not part of what the judge grades.
    bare = module.reward_func([q.removesuffix("<|im_end|>") for q in queries], prompts, None)
    assert torch.allclose(out["rewards"], bare["rewards"])
    with pytest.raises(ValueError, match="holds one sample of prompt"):
        module.reward_func(queries[:3], prompts[:3], None)
    plaudit_env(JUDGE)
    module.reset()
    with pytest.raises(RewardUnavailable) as caught:
        module.reward_func([prompts[0] + "4", prompts[0] + TOO_LONG], prompts[:2], None)
    assert caught.value.index == 1
    module.reset()


def test_openrlhf_reward_func_unwraps_templated_prompts_as_get_reward_does(
    live_all_server: LiveServer, plaudit_env: Callable[[dict[str, Any]], None]
) -> None:
    """Issue 22: the same spec and samples give the same rewards through the python-file
    adapter and through /get_reward, which turns a chat-templated prompt (here SmolLM's, with
    its system prompt) back into the question before the judge sees it."""
    pytest.importorskip("torch")
    plaudit_env(JUDGE)
    module = _load_by_path(trainer_client.openrlhf, "reward_func")
    system = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
    prompt = (
        f"<|im_start|>system\n{system}<|im_end|>\n"
        "<|im_start|>user\nName a prime number.<|im_end|>\n<|im_start|>assistant\n"
    )
    responses = ["7", "9 is prime", "Two.", "A cat sat on the mat."]
    queries = [prompt + r + "<|im_end|>" for r in responses]
    through_file = module.reward_func(queries, [prompt] * 4, None)["rewards"].tolist()
    with PlauditClient(live_all_server.url, api_key=live_all_server.reward_key) as client:
        served = client.request(
            "POST",
            "/get_reward",
            json={"query": queries, "prompts": [prompt] * 4, "labels": None},
            params={"spec": json.dumps(JUDGE)},
        )
        plain = client.rewards_group("Name a prime number.", responses, JUDGE)
    assert through_file == pytest.approx(served["rewards"])
    assert through_file == pytest.approx([r["total"] for r in plain["results"]])
    module.reset()


def test_adapter_modules_do_not_import_torch() -> None:
    code = (
        "import json, sys\n"
        "import trainer_client, trainer_client.rewards, trainer_client.verl\n"
        "import trainer_client.openrlhf\n"
        "heavy = {'torch', 'fastapi', 'numpy', 'services', 'trl', 'transformers'}\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in heavy)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert json.loads(out.stdout) == []
