"""The trainer adapters' pure parts: grouping a batch by prompt, texts, specs, answers."""

from __future__ import annotations

import inspect
import json
import pickle
from pathlib import Path

import pytest

from trainer_client import AsyncPlauditReward, PlauditError, PlauditReward, plaudit_reward_func
from trainer_client._groups import (
    Scored,
    completion_text,
    group_by_prompt,
    prompt_wire,
    read_group,
    scatter,
)
from trainer_client._scorer import config_from_env, load_spec, rewards_spec
from trainer_client.openrlhf import response_text

SPEC = {"channels": {"diversity": {"weight": 0.5}, "judge_scale": {"k": 5}}}


def test_group_by_prompt_keeps_first_appearance_and_batch_order() -> None:
    prompts = ["b", "a", "b", "a", "c"]
    groups = group_by_prompt(prompts, ["b0", "a0", "b1", "a1", "c0"], [1, 2, 3, 4, 5])
    assert [(g.prompt, g.indices, g.texts) for g in groups] == [
        ("b", (0, 2), ("b0", "b1")),
        ("a", (1, 3), ("a0", "a1")),
        ("c", (4,), ("c0",)),
    ]
    assert groups[0].token_counts == (1, 3)
    with pytest.raises(ValueError, match="2 prompts for 1 completions"):
        group_by_prompt(["a", "b"], ["x"])


def test_chat_prompts_group_by_role_and_content_only() -> None:
    first = [{"role": "user", "content": "Hi", "name": "u1"}]
    second = [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]
    groups = group_by_prompt([first, second], ["x", "y"])
    assert len(groups) == 1
    assert groups[0].prompt == [{"role": "user", "content": "Hi"}]
    with pytest.raises(TypeError, match="a prompt is a string"):
        prompt_wire(42)


def test_completion_text_of_trl_formats() -> None:
    assert completion_text("plain") == "plain"
    assert completion_text([{"role": "assistant", "content": "Paris."}]) == "Paris."
    turns = [
        {"role": "assistant", "content": "Let me check."},
        {"role": "user", "content": "tool output"},
        {"role": "assistant", "content": [{"type": "text", "text": "Paris."}]},
    ]
    assert completion_text(turns) == "Let me check.\n\nParis."
    assert completion_text({"role": "assistant", "content": None}) == ""
    with pytest.raises(TypeError):
        completion_text(3.5)


def test_specs_for_trainers_must_ask_for_rewards(tmp_path: Path) -> None:
    assert rewards_spec(SPEC) == SPEC and rewards_spec(SPEC) is not SPEC
    with pytest.raises(ValueError, match="computes group advantages itself"):
        rewards_spec({"channels": {"judge_scale": {}}, "advantage": "grpo"})
    with pytest.raises(ValueError, match='non-empty "channels"'):
        rewards_spec({"channels": {}})
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(SPEC))
    assert load_spec(str(path)) == load_spec(json.dumps(SPEC)) == SPEC
    with pytest.raises(ValueError, match="neither JSON nor a readable file"):
        load_spec(str(tmp_path / "missing.json"))


def test_config_from_env() -> None:
    env = {"PLAUDIT_REWARD_SPEC": json.dumps(SPEC), "PLAUDIT_TIMEOUT": "12"}
    config, spec = config_from_env(env)
    assert config.base_url == "http://127.0.0.1:8000" and config.api_key is None
    assert config.timeout.read == 12.0  # type: ignore[union-attr]
    assert spec == SPEC
    with pytest.raises(ValueError, match="set PLAUDIT_REWARD_SPEC"):
        config_from_env({})


def test_read_group_and_scatter_put_answers_back_in_batch_order() -> None:
    groups = group_by_prompt(["p", "q", "p"], ["a", "b", "c"])
    p_answer = _answer(
        {"id": "0", "total": 1.0, "status": "ok", "channels": {"judge_scale": _channel(1.0)}},
        {"id": "1", "total": None, "status": "invalid", "channels": {"judge_scale": _bad()}},
    )
    q_answer = _answer({"id": "0", "total": 2.0, "status": "ok", "channels": {}})
    answers = [read_group(p_answer, 2), read_group(q_answer, 1)]
    rewards = scatter(3, groups, answers)
    assert rewards.totals == [1.0, 2.0, None]
    assert rewards.statuses == ["ok", "ok", "invalid"]
    assert rewards.channels == {"judge_scale": [1.0, None, None]}
    assert rewards.errors[2] == "judge_scale: prompt too long"
    assert rewards.first_failure() == 2
    assert rewards.meta["judge_scale"] == [{"model": "m"}]
    unscored = Scored.unscored(2, "skipped", ["diversity"], "why")
    assert unscored.totals == [None, None] and unscored.channels == {"diversity": [None, None]}


def test_reward_function_shape_name_and_pickling() -> None:
    reward = plaudit_reward_func("http://127.0.0.1:9", SPEC, name="judge")
    assert isinstance(reward, PlauditReward) and reward.__name__ == "judge"
    copy = pickle.loads(pickle.dumps(reward))
    assert copy.__name__ == "judge" and copy.scorer.spec == SPEC
    async_reward = plaudit_reward_func("http://127.0.0.1:9", SPEC, asynchronous=True)
    assert isinstance(async_reward, AsyncPlauditReward)
    assert inspect.iscoroutinefunction(async_reward)
    assert async_reward.__name__ == "plaudit"
    assert inspect.iscoroutinefunction(pickle.loads(pickle.dumps(async_reward)))
    with pytest.raises(ValueError, match="advantage"):
        plaudit_reward_func("http://x", {"channels": {"judge_scale": {}}, "advantage": "odrpo"})
    with pytest.raises(ValueError, match="on_error"):
        plaudit_reward_func("http://x", SPEC, on_error="zero")  # type: ignore[arg-type]


def test_openrlhf_response_text() -> None:
    assert response_text("<s>Q: 2+2? A: 4", "Q: 2+2?") == " A: 4"
    assert response_text("Q: 2+2? A: 4", "Q: 2+2?") == " A: 4"
    assert response_text("unrelated", "Q") == "unrelated"


def test_read_group_reads_the_servers_wire_model_and_names_what_is_wrong() -> None:
    # Issue 20: the client parses the answer with the server's RewardsGroupResponse instead
    # of reading a dict with .get, so a malformed answer is an error, not a silent None.
    with pytest.raises(PlauditError, match="unreadable answer"):
        read_group({"results": [{"total": 1.0, "status": "ok", "channels": {}}]}, 1)
    with pytest.raises(PlauditError, match="expected 2 results"):
        read_group(_answer({"id": "0", "total": 1.0, "status": "ok", "channels": {}}), 2)


def _answer(*results: dict[str, object]) -> dict[str, object]:
    """A whole /v1/rewards/group answer around ``results``."""
    stats = {"mean": None, "std": None, "ok": 0, "failed": 0, "per_channel": {}}
    return {
        "kind": "rewards",
        "spec_hash": "h",
        "advantage": "none",
        "results": list(results),
        "stats": stats,
    }


def _channel(value: float) -> dict[str, object]:
    return {"value": value, "status": "ok", "meta": {"model": "m"}}


def _bad() -> dict[str, object]:
    return {"value": None, "status": "invalid", "error": "prompt too long", "meta": {}}


def test_the_reward_file_strips_end_markers_as_the_server_does() -> None:
    import trainer_client.openrlhf as openrlhf
    from services.protocols.scoring import split_response

    prompt = "<|user|>Hi<|assistant|>"
    query = prompt + "Yo<end_of_turn><|im_end|>\n"
    assert openrlhf.response_text(query, prompt) == split_response(query, prompt) == "Yo"
