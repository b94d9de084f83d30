"""Composite rewards with a scripted judge: totals, weights, failures, advantages, storage.

The scripted judge prefers "GOOD", grades "GOOD" completions 4 and others 2, and fails on
"FAIL". Each channel is checked against the endpoint of the service it composes.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.services.judge.scripted import ScriptedBackend

PROMPT = "Name a colour."
GROUP = ["GOOD red", "blue", "GOOD green", "the sky"]


async def _rewards(client: httpx.AsyncClient, **body: Any) -> dict[str, Any]:
    body = {"prompt": PROMPT, "completions": GROUP, **body}
    response = await client.post("/v1/rewards/group", json=body)
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()
    return data


async def _scale(client: httpx.AsyncClient, completions: list[str], k: int) -> list[Any]:
    body = {"prompt": PROMPT, "completions": completions, "k": k}
    return [
        r["expected"] for r in (await client.post("/v1/judge/scale", json=body)).json()["results"]
    ]


async def _diversity(client: httpx.AsyncClient, completions: list[str]) -> list[float]:
    data = (await client.post("/v1/diversity/group", json={"completions": completions})).json()
    return [float(r) for r in data["rewards"]]


async def test_weighted_totals_match_the_composed_services(
    rewards_client: httpx.AsyncClient,
) -> None:
    spec = {"channels": {"judge_scale": {"weight": 2.0, "k": 5}, "diversity": {"weight": 0.5}}}
    data = await _rewards(rewards_client, spec=spec, id="g7")
    grades = await _scale(rewards_client, GROUP, 5)
    spread = await _diversity(rewards_client, GROUP)
    assert data["kind"] == "rewards" and data["id"] == "g7" and data["advantage"] == "none"
    assert [r["id"] for r in data["results"]] == ["c0", "c1", "c2", "c3"]
    for result, grade, div in zip(data["results"], grades, spread, strict=True):
        assert "advantage" not in result, "rewards responses carry no advantage field"
        assert result["status"] == "ok"
        assert result["channels"]["judge_scale"]["value"] == pytest.approx(grade)
        assert result["channels"]["diversity"]["value"] == pytest.approx(div)
        assert result["total"] == pytest.approx(2.0 * grade + 0.5 * div)
    first = data["results"][0]["channels"]
    assert first["judge_scale"]["meta"]["model"] == "scripted-judge"
    assert first["judge_scale"]["meta"]["template"] == "scale@2"
    assert first["judge_scale"]["meta"]["k"] == 5
    assert first["judge_scale"]["detail"]["mode"] == 4
    assert first["diversity"]["meta"]["metric"] == "centroid"
    assert "MiniLM" in first["diversity"]["meta"]["embedder"]
    totals = [r["total"] for r in data["results"]]
    stats = data["stats"]
    assert stats["mean"] == pytest.approx(sum(totals) / 4)
    assert stats["ok"] == 4 and stats["failed"] == 0
    assert stats["per_channel"]["judge_scale"]["mean"] == pytest.approx(sum(grades) / 4)


async def test_a_zero_weight_channel_is_reported_but_not_counted(
    rewards_client: httpx.AsyncClient,
) -> None:
    spec = {"channels": {"judge_scale": {"weight": 1.0, "k": 5}, "diversity": {"weight": 0}}}
    data = await _rewards(rewards_client, spec=spec)
    for result in data["results"]:
        assert result["total"] == pytest.approx(result["channels"]["judge_scale"]["value"])
        assert result["channels"]["diversity"]["status"] == "ok"


async def test_pairwise_channel_uses_finish_reasons_and_ids(
    rewards_client: httpx.AsyncClient,
) -> None:
    completions = [{"id": "x", "text": "GOOD"}, "bad", "worse", "GOOD too"]
    spec = {"channels": {"judge_pairwise": {"weight": 3.0}}}
    data = await _rewards(
        rewards_client,
        completions=completions,
        finish_reasons=["stop", "stop", "stop", "length"],
        token_counts=[3, 1, 1, 4],
        spec=spec,
    )
    # As /v1/judge/group: x beats c1; c3 beats c2 but was truncated, so -1 for both.
    assert [r["total"] for r in data["results"]] == [3.0, -3.0, -3.0, -3.0]
    assert [r["id"] for r in data["results"]] == ["x", "c1", "c2", "c3"]
    meta = data["results"][0]["channels"]["judge_pairwise"]["meta"]
    assert meta["template"] == "pairwise@2" and meta["scoring"] == "pprgde"
    assert meta["mode"] == "logprob" and meta["model"] == "scripted-judge"


async def test_a_failed_channel_makes_the_total_null_not_zero(
    rewards_client: httpx.AsyncClient,
) -> None:
    group = ["GOOD red", "blue", "FAIL green", "the sky"]
    spec = {
        "channels": {"judge_scale": {"k": 5}, "diversity": {"weight": 0.5}},
        "advantage": "grpo",
    }
    data = await _rewards(rewards_client, completions=group, spec=spec)
    failed = data["results"][2]
    assert failed["total"] is None and failed["advantage"] is None
    assert failed["status"] == "error"
    assert failed["channels"]["judge_scale"] == {
        **failed["channels"]["judge_scale"],
        "value": None,
        "status": "error",
    }
    assert failed["channels"]["judge_scale"]["error"]
    assert failed["channels"]["diversity"]["status"] == "ok"
    ok = [r for i, r in enumerate(data["results"]) if i != 2]
    assert all(r["status"] == "ok" and r["total"] is not None for r in ok)
    totals = [r["total"] for r in ok]
    assert data["stats"]["ok"] == 3 and data["stats"]["failed"] == 1
    assert data["stats"]["mean"] == pytest.approx(sum(totals) / 3)
    assert data["stats"]["per_channel"]["judge_scale"]["failed"] == 1
    assert sum(r["advantage"] for r in ok) == pytest.approx(0.0, abs=1e-9)


async def test_pairwise_failures_are_statuses_too(rewards_client: httpx.AsyncClient) -> None:
    group = ["GOOD", "ok", "FAIL here", "other"]
    data = await _rewards(
        rewards_client, completions=group, spec={"channels": {"judge_pairwise": {}}}
    )
    assert [r["total"] for r in data["results"]] == [1.0, -1.0, None, None]
    assert [r["status"] for r in data["results"]] == ["ok", "ok", "error", "error"]


async def test_grpo_advantages_on_totals(rewards_client: httpx.AsyncClient) -> None:
    spec = {"channels": {"judge_scale": {"k": 5}}, "advantage": "grpo"}
    data = await _rewards(rewards_client, spec=spec)
    assert data["kind"] == "advantages" and data["advantage"] == "grpo"
    totals = [r["total"] for r in data["results"]]
    mean = sum(totals) / 4
    std = (sum((t - mean) ** 2 for t in totals) / 4) ** 0.5
    for result, total in zip(data["results"], totals, strict=True):
        assert result["advantage"] == pytest.approx((total - mean) / (std + 1e-6))


async def test_odrpo_advantages_use_the_scale_mode(rewards_client: httpx.AsyncClient) -> None:
    group = ["GOOD red", "blue", "GOOD green", "FAIL", "sky"]
    spec = {
        "channels": {"judge_scale": {"k": 5}, "diversity": {"weight": 0.1}},
        "advantage": "odrpo",
    }
    data = await _rewards(rewards_client, completions=group, spec=spec)
    body = {"groups": [{"scores": [4, 2, 4, 2]}], "k": 5, "estimator": "odrpo"}
    expected = (await rewards_client.post("/v1/ordinal/advantages", json=body)).json()
    want = expected["groups"][0]["advantages"]
    got = [r["advantage"] for r in data["results"]]
    assert got[3] is None and data["results"][3]["total"] is None
    assert [got[i] for i in (0, 1, 2, 4)] == pytest.approx(want)


async def test_channels_run_concurrently(
    rewards_client: httpx.AsyncClient, scripted: ScriptedBackend
) -> None:
    scripted.delay = 0.2
    spec: dict[str, Any] = {"channels": {"judge_scale": {}, "judge_pairwise": {}}}
    await _rewards(rewards_client, completions=["p", "q", "r", "s"], spec=spec)
    assert scripted.max_in_flight == 2, "both channels' judge calls were in flight together"


async def test_a_down_judge_is_a_503(
    rewards_client: httpx.AsyncClient, scripted: ScriptedBackend
) -> None:
    scripted.down = True
    body = {"prompt": PROMPT, "completions": GROUP, "spec": {"channels": {"judge_scale": {}}}}
    response = await rewards_client.post("/v1/rewards/group", json=body)
    assert response.status_code == 503 and response.json()["error"]["type"] == "backend_unavailable"


async def test_groups_are_stored_and_listed_per_run(rewards_client: httpx.AsyncClient) -> None:
    spec: dict[str, Any] = {"channels": {"judge_scale": {"k": 5}}}
    first = await _rewards(rewards_client, spec=spec, run_id="run-r", step=1, id="g1")
    await _rewards(rewards_client, spec=spec, run_id="run-r", step=2)
    await _rewards(rewards_client, spec=spec, run_id="run-other", step=1)
    ordinal = {"groups": [{"scores": [1, 2]}], "k": 2, "run_id": "run-r", "step": 1}
    await rewards_client.post("/v1/ordinal/advantages", json=ordinal)
    page = (await rewards_client.get("/v1/rewards/runs/run-r/groups")).json()
    assert page["run_id"] == "run-r" and page["next_offset"] is None
    assert [(g["service"], g["step"], g["group_id"]) for g in page["groups"]] == [
        ("rewards", 1, "g1"),
        ("rewards", 2, None),
    ]
    stored = page["groups"][0]["result"]
    assert stored["spec_hash"] == first["spec_hash"] and stored["results"] == first["results"]
    step2 = (await rewards_client.get("/v1/rewards/runs/run-r/groups", params={"step": 2})).json()
    assert [g["step"] for g in step2["groups"]] == [2]
    one = (await rewards_client.get("/v1/rewards/runs/run-r/groups", params={"limit": 1})).json()
    assert len(one["groups"]) == 1 and one["next_offset"] == 1
    everything = (await rewards_client.get("/v1/runs/run-r/groups")).json()["items"]
    assert {g["service"] for g in everything} == {"rewards", "ordinal"}
    assert (await rewards_client.get("/v1/rewards/runs/nobody/groups")).json()["groups"] == []


async def test_a_retry_with_the_same_key_is_scored_once(
    rewards_client: httpx.AsyncClient,
) -> None:
    body = {
        "prompt": PROMPT,
        "completions": ["u", "v"],
        "run_id": "run-i",
        "spec": {"channels": {"judge_scale": {}}},
    }
    headers = {"Idempotency-Key": "rewards-1"}
    first = await rewards_client.post("/v1/rewards/group", json=body, headers=headers)
    again = await rewards_client.post("/v1/rewards/group", json=body, headers=headers)
    assert first.status_code == again.status_code == 200
    assert first.json() == again.json()
    stored = (await rewards_client.get("/v1/rewards/runs/run-i/groups")).json()["groups"]
    assert len(stored) == 1
    other = {**body, "completions": ["u", "w"]}
    conflict = await rewards_client.post("/v1/rewards/group", json=other, headers=headers)
    assert conflict.status_code == 409
