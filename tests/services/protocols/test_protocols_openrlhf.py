"""OpenRLHF's ``/get_reward`` with a scripted judge and the real MiniLM embedder, both set-ups.

Requests are built as OpenRLHF builds them: one sample each, ``{"query": [prompt + response],
"prompts": [prompt], "labels": [label]}``, sent concurrently for a group. The scripted judge
grades "GOOD" 4 and anything else 2, and fails on "FAIL".
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from tests.conftest import assert_envelope
from tests.services.judge.scripted import ScriptedBackend

PROMPT = "<|im_start|>user\nName a colour.<|im_end|>\n<|im_start|>assistant\n"
RESPONSES = ["GOOD red", "blue", "GOOD green", "the sky is azure"]
GROUP_SPEC: dict[str, Any] = {
    "channels": {"judge_scale": {"k": 5}, "diversity": {"weight": 0.5}},
}


def _body(response: str, prompt: str = PROMPT) -> dict[str, Any]:
    return {"query": [prompt + response + "<|im_end|>"], "prompts": [prompt], "labels": [None]}


def _params(spec: Any = None, **params: Any) -> dict[str, Any]:
    if spec is not None:
        params["spec"] = json.dumps(spec)
    return params


async def _post(client: httpx.AsyncClient, body: dict[str, Any], **params: Any) -> dict[str, Any]:
    response = await client.post("/get_reward", json=body, params=params)
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()
    return data


async def _group(
    client: httpx.AsyncClient, responses: list[str], **params: Any
) -> list[dict[str, Any]]:
    """One request per sample, all at once, as OpenRLHF's rollout workers send them."""
    return list(await asyncio.gather(*(_post(client, _body(r), **params) for r in responses)))


async def _stored(client: httpx.AsyncClient, run_id: str) -> list[dict[str, Any]]:
    page = (await client.get(f"/v1/rewards/runs/{run_id}/groups")).json()
    return list(page["groups"])


async def test_the_default_spec_scores_each_query_at_once(
    rewards_client: httpx.AsyncClient,
) -> None:
    body = {
        "query": [PROMPT + "GOOD red<|im_end|>", PROMPT + "blue<|im_end|><|endoftext|>"],
        "prompts": [PROMPT, PROMPT],
        "labels": [None, "red"],
        "pixel_values": None,
    }
    data = await _post(rewards_client, body)
    assert set(data) == {"rewards", "scores", "extra_logs", "statuses", "truncated", "spec_hash"}
    same = await rewards_client.post(
        "/v1/rewards/group",
        json={
            "prompt": PROMPT,
            "completions": ["GOOD red", "blue"],
            "spec": {"channels": {"judge_scale": {}}},
        },
    )
    expected = same.json()
    assert data["rewards"] == pytest.approx([r["total"] for r in expected["results"]])
    assert data["spec_hash"] == expected["spec_hash"]
    assert data["rewards"][0] > data["rewards"][1]
    assert data["statuses"] == ["ok", "ok"]
    assert data["scores"] == pytest.approx([(r - 1) / 9 for r in data["rewards"]])
    assert data["extra_logs"] == {
        "plaudit_failed": [0.0, 0.0],
        "plaudit_group_size": [2.0, 2.0],
        "plaudit_truncated": [0.0, 0.0],
        "plaudit_judge_scale": pytest.approx(data["rewards"]),
    }


async def test_single_sample_requests_are_scored_as_one_group(
    rewards_client: httpx.AsyncClient,
) -> None:
    answers = await _group(
        rewards_client, RESPONSES, **_params(GROUP_SPEC, group_size=4, run_id="orl", step=3)
    )
    [stored] = await _stored(rewards_client, "orl")
    assert stored["step"] == 3
    totals = [r["total"] for r in stored["result"]["results"]]
    assert len(totals) == 4
    assert sorted(a["rewards"][0] for a in answers) == pytest.approx(sorted(totals))
    diversity = [a["extra_logs"]["plaudit_diversity"][0] for a in answers]
    assert sorted(diversity)[0] == 0.0 and sorted(diversity)[-1] == 1.0
    for answer, response, spread in zip(answers, RESPONSES, diversity, strict=True):
        assert answer["extra_logs"]["plaudit_group_size"] == [4.0]
        assert answer["extra_logs"]["plaudit_failed"] == [0.0]
        grade = answer["extra_logs"]["plaudit_judge_scale"][0]
        assert (grade > 3.5) == response.startswith("GOOD")
        assert answer["rewards"][0] == pytest.approx(grade + 0.5 * spread)
        assert 0.0 <= answer["scores"][0] <= 1.0


async def test_identical_samples_each_count(rewards_client: httpx.AsyncClient) -> None:
    answers = await _group(
        rewards_client,
        ["blue", "blue", "GOOD red"],
        **_params(GROUP_SPEC, group_size=3, run_id="d"),
    )
    [stored] = await _stored(rewards_client, "d")
    assert len(stored["result"]["results"]) == 3
    assert answers[0]["rewards"] == answers[1]["rewards"]
    assert all(a["extra_logs"]["plaudit_group_size"] == [3.0] for a in answers)


async def test_the_deadline_scores_the_samples_that_arrived(
    rewards_client: httpx.AsyncClient,
) -> None:
    params = _params(GROUP_SPEC, group_size=4, wait_s=0.3, run_id="late")
    answers = await _group(rewards_client, RESPONSES[:3], **params)
    assert [a["extra_logs"]["plaudit_group_size"] for a in answers] == [[3.0]] * 3
    [stored] = await _stored(rewards_client, "late")
    assert len(stored["result"]["results"]) == 3


async def test_evaluation_groups_settle_and_training_groups_gather_whole(
    rewards_client: httpx.AsyncClient,
) -> None:
    """OpenRLHF sends evaluation (4 per prompt) and training (8 here) to one URL: the
    evaluation group is scored once it settles, not after wait_s (600 s here, which the test's
    guard would catch); a training group on the same options still gathers all 8."""
    params = _params(GROUP_SPEC, group_size=8, wait_s=600, eval_group_size=4, settle_s=0.3)
    params["run_id"] = "eval"
    answers = await asyncio.wait_for(_group(rewards_client, RESPONSES, **params), 60)
    assert [a["extra_logs"]["plaudit_group_size"] for a in answers] == [[4.0]] * 4
    assert all(a["statuses"] == ["ok"] for a in answers)
    training = await asyncio.wait_for(_group(rewards_client, RESPONSES * 2, **params), 60)
    assert [a["extra_logs"]["plaudit_group_size"] for a in training] == [[8.0]] * 8
    assert [len(g["result"]["results"]) for g in await _stored(rewards_client, "eval")] == [4, 8]


async def test_a_lone_straggler_of_a_group_channel_is_failed_not_zero(
    rewards_client: httpx.AsyncClient,
) -> None:
    spec = {"channels": {"judge_pairwise": {"weight": 2.0}, "diversity": {}}}
    data = await _post(rewards_client, _body("blue"), **_params(spec, group_size=4, wait_s=0.1))
    assert data["statuses"] == ["group_too_small"]
    assert data["extra_logs"]["plaudit_failed"] == [1.0]
    assert data["rewards"] == [0.5] and data["scores"] == [0.5], "the channels' midpoints"


async def test_a_failed_sample_gets_its_group_mean_under_neutral(
    rewards_client: httpx.AsyncClient,
) -> None:
    responses = ["GOOD red", "blue", "FAIL green", "the sky"]
    answers = await _group(rewards_client, responses, **_params(GROUP_SPEC, group_size=4))
    failed = answers[2]
    ok = [a["rewards"][0] for i, a in enumerate(answers) if i != 2]
    assert failed["statuses"] == ["error"] and failed["extra_logs"]["plaudit_failed"] == [1.0]
    assert failed["rewards"][0] == pytest.approx(sum(ok) / 3)
    assert all(a["statuses"] == ["ok"] for i, a in enumerate(answers) if i != 2)


async def test_the_failure_policy_per_request(rewards_client: httpx.AsyncClient) -> None:
    body = {
        "query": [PROMPT + "GOOD red", PROMPT + "FAIL blue"],
        "prompts": [PROMPT, PROMPT],
        "labels": None,
    }
    neutral = await _post(rewards_client, body)
    assert neutral["rewards"][1] == neutral["rewards"][0]
    assert neutral["extra_logs"]["plaudit_failed"] == [0.0, 1.0]
    response = await rewards_client.post("/get_reward", json=body, params={"on_failure": "error"})
    error = assert_envelope(response, 503)
    assert error["type"] == "backend_unavailable" and "1 of 2" in error["message"]
    assert response.headers["retry-after"] == "5"


async def test_a_down_judge_is_a_503_whatever_the_policy(
    rewards_client: httpx.AsyncClient, scripted: ScriptedBackend
) -> None:
    scripted.down = True
    response = await rewards_client.post("/get_reward", json=_body("blue"))
    assert_envelope(response, 503)


async def test_a_cancelled_request_leaves_its_group(rewards_client: httpx.AsyncClient) -> None:
    params = _params(GROUP_SPEC, group_size=2, run_id="cancel")
    gone = asyncio.ensure_future(_post(rewards_client, _body("GOOD gone"), **params))
    await asyncio.sleep(0.2)
    gone.cancel()
    await asyncio.gather(gone, return_exceptions=True)
    answers = await _group(rewards_client, ["blue", "GOOD red"], **params)
    [stored] = await _stored(rewards_client, "cancel")
    assert len(stored["result"]["results"]) == 2
    assert all(a["extra_logs"]["plaudit_group_size"] == [2.0] for a in answers)


async def test_several_prompts_in_one_request_are_grouped_by_prompt(
    rewards_client: httpx.AsyncClient,
) -> None:
    other = "<|im_start|>user\nName a fruit.<|im_end|>\n<|im_start|>assistant\n"
    fruit = ["apple", "GOOD pear", "a ripe mango from the market"]
    queries = [PROMPT + r for r in RESPONSES[:3]] + [other + r for r in fruit]
    prompts = [PROMPT] * 3 + [other] * 3
    # Interleave the two prompts' samples: grouping is by prompt, not by position.
    order = [0, 3, 1, 4, 2, 5]
    body = {"query": [queries[i] for i in order], "prompts": [prompts[i] for i in order]}
    data = await _post(rewards_client, body, **_params(GROUP_SPEC, group_size=3, run_id="two"))
    assert data["extra_logs"]["plaudit_group_size"] == [3.0] * 6
    colours = [data["extra_logs"]["plaudit_diversity"][i] for i in (0, 2, 4)]
    fruits = [data["extra_logs"]["plaudit_diversity"][i] for i in (1, 3, 5)]
    for spread in (colours, fruits):
        assert min(spread) == 0.0 and max(spread) == 1.0
    grades = data["extra_logs"]["plaudit_judge_scale"]
    assert [g > 3.5 for g in grades] == [True, False, False, True, True, False]
    assert len(await _stored(rewards_client, "two")) == 2


async def test_an_empty_shard_gets_an_empty_answer(rewards_client: httpx.AsyncClient) -> None:
    # OpenRLHF splits each request across its --remote_rm_url endpoints: one sample and two
    # endpoints send the second one empty lists.
    data = await _post(rewards_client, {"query": [], "prompts": [], "labels": []})
    assert data["rewards"] == data["scores"] == data["statuses"] == []
    assert data["extra_logs"] == {
        "plaudit_failed": [],
        "plaudit_group_size": [],
        "plaudit_truncated": [],
        "plaudit_judge_scale": [],
    }


BAD_REQUESTS = [
    ({"spec": json.dumps({"channels": {"foo": {}}})}, _body("x"), "spec.channels.foo"),
    ({"spec": "{not json"}, _body("x"), "spec"),
    ({"spec": json.dumps({"channels": {"diversity": {}}})}, _body("x"), "group_size"),
    (
        {"spec": json.dumps({"channels": {"judge_scale": {}}, "advantage": "grpo"})},
        _body("x"),
        "spec.advantage",
    ),
    ({"on_failure": "ignore"}, _body("x"), "on_failure"),
    ({"group_size": 0}, _body("x"), "group_size"),
    (
        {"spec": json.dumps(GROUP_SPEC), "group_size": 2, "eval_group_size": 4},
        _body("x"),
        "eval_group_size",
    ),
    ({"settle_s": 0}, _body("x"), "settle_s"),
    ({}, {"query": [PROMPT + "x", "other text"], "prompts": [PROMPT, PROMPT]}, "query[1]"),
    ({}, {"query": [PROMPT + "x"], "prompts": []}, "prompts"),
    ({}, {"query": [PROMPT + "x"], "prompts": [PROMPT], "labels": [1, 2]}, "labels"),
    ({}, {"query": "text", "prompts": [PROMPT]}, None),
    ({}, {"prompts": [PROMPT]}, "prompts"),
]


@pytest.mark.parametrize(("params", "body", "param"), BAD_REQUESTS)
async def test_mistakes_are_422_in_the_envelope(
    rewards_client: httpx.AsyncClient,
    params: dict[str, Any],
    body: dict[str, Any],
    param: str | None,
) -> None:
    response = await rewards_client.post("/get_reward", json=body, params=params)
    error = assert_envelope(response, 422, param)
    assert error["type"] == "invalid_request"
