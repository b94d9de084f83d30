"""Judge endpoints' aggregation, statuses and errors, with a scripted backend."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI

from services.app import create_app
from services.core.models.embedder import Embedder
from services.settings import Settings
from tests.conftest import assert_envelope
from tests.services.judge.scripted import ScriptedBackend


@pytest.fixture
def scripted() -> ScriptedBackend:
    return ScriptedBackend()


@pytest.fixture
async def judge_client(
    settings: Settings, embedder: Embedder, scripted: ScriptedBackend
) -> AsyncIterator[httpx.AsyncClient]:
    active = settings.with_overrides(judge_max_group_size=8, judge_max_pairs=20)
    app: FastAPI = create_app(active, embedder=embedder, judge_backend=scripted)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            yield client


async def test_pairwise_swap_in_one_batched_call(
    judge_client: httpx.AsyncClient, scripted: ScriptedBackend
) -> None:
    body = {"prompt": "Q?", "response_a": "GOOD answer", "response_b": "meh"}
    data = (await judge_client.post("/v1/judge/pairwise", json=body)).json()
    assert data["winner"] == "a" and data["consistent"] is True and data["status"] == "ok"
    assert [o["order"] for o in data["orders"]] == ["ab", "ba"]
    assert data["p_a"] == pytest.approx(0.9)
    assert [len(c) for c in scripted.calls] == [2], "both orders go to the backend in one call"
    assert data["judge"] == {
        "backend": "scripted",
        "model": "scripted-judge",
        "template": "pairwise@2",
        "mode": "logprob",
        "sampling": {"temperature": 0.0},
        "verdict_source": "logprob",
        "choice_scoring": None,  # the scripted backend does not say
    }


async def test_position_bias_shows_as_inconsistency(
    judge_client: httpx.AsyncClient, scripted: ScriptedBackend
) -> None:
    scripted.first_slot_bias = 0.45
    body = {"prompt": "Q?", "completions": ["a", "b", "c", "d"], "pairing": "round_robin"}
    data = (await judge_client.post("/v1/judge/group", json=body)).json()
    assert data["inconsistency_rate"] == 1.0 and data["first_slot_rate"] == 1.0
    assert data["rewards"] == [0.0, 0.0, 0.0, 0.0] and all(data["tie_mask"])


async def test_group_pprgde_rewards_and_ids(judge_client: httpx.AsyncClient) -> None:
    completions = [{"id": "x", "text": "GOOD"}, "bad", "worse", "GOOD too"]
    body = {
        "prompt": "Q?",
        "completions": completions,
        "finish_reasons": ["stop", "stop", "stop", "length"],
    }
    data = (await judge_client.post("/v1/judge/group", json=body)).json()
    # Pairs (x, c1): x wins; (c2, c3): c3 wins but was truncated, so -1 for both.
    assert data["rewards"] == [1.0, -1.0, -1.0, -1.0]
    assert [r["id"] for r in data["results"]] == ["x", "c1", "c2", "c3"]
    assert data["kind"] == "rewards" and data["status"] == ["ok"] * 4


@pytest.mark.parametrize("scoring", ["win_rate", "bradley_terry"])
async def test_other_scorings_rank_the_good_completion_first(
    judge_client: httpx.AsyncClient, scoring: str
) -> None:
    body = {
        "prompt": "Q",
        "completions": ["x", "GOOD", "y"],
        "pairing": "round_robin",
        "scoring": scoring,
    }
    rewards = (await judge_client.post("/v1/judge/group", json=body)).json()["rewards"]
    assert rewards[1] == max(rewards)


async def test_anchor_pairing(judge_client: httpx.AsyncClient) -> None:
    body = {"prompt": "Q", "completions": ["GOOD", "plain"], "pairing": "anchor", "anchor": "ref"}
    data = (await judge_client.post("/v1/judge/group", json=body)).json()
    assert data["rewards"] == [1.0, 0.0] and data["tie_mask"] == [False, True]
    assert {p["b"] for p in data["pairs"]} == {"anchor"}


async def test_failures_are_statuses_never_zero(judge_client: httpx.AsyncClient) -> None:
    body = {"prompt": "Q", "completions": ["GOOD", "ok", "FAIL here", "SLOW one"]}
    data = (await judge_client.post("/v1/judge/group", json=body)).json()
    assert data["rewards"][:2] == [1.0, -1.0]
    assert data["rewards"][2:] == [None, None]
    assert data["status"] == ["ok", "ok", "error", "error"]


async def test_a_down_backend_is_a_503(
    judge_client: httpx.AsyncClient, scripted: ScriptedBackend
) -> None:
    scripted.down = True
    r = await judge_client.post(
        "/v1/judge/pairwise", json={"prompt": "Q", "response_a": "a", "response_b": "b"}
    )
    assert assert_envelope(r, 503)["type"] == "backend_unavailable"
    g = await judge_client.post("/v1/judge/group", json={"prompt": "Q", "completions": ["a", "b"]})
    assert_envelope(g, 503)
    s = await judge_client.post("/v1/judge/scale", json={"prompt": "Q", "completions": ["a"]})
    assert_envelope(s, 503)


async def test_generate_mode_asks_for_a_json_verdict(
    judge_client: httpx.AsyncClient, scripted: ScriptedBackend
) -> None:
    body = {"prompt": "Q", "response_a": "meh", "response_b": "GOOD", "mode": "generate"}
    data = (await judge_client.post("/v1/judge/pairwise", json=body)).json()
    assert data["winner"] == "b" and data["judge"]["template"] == "pairwise_json@2"
    assert json.loads(data["orders"][0]["reply"])["verdict"] == "B"
    assert {o["verdict_source"] for o in data["orders"]} == {"structured"}
    assert data["judge"]["sampling"]["structured"] == 1
    [sent] = scripted.calls
    schema = sent[0].json_schema  # type: ignore[union-attr]
    assert schema is not None and schema["properties"]["verdict"]["enum"] == ["A", "B", "tie"]
    assert schema["properties"]["analysis"]["maxLength"] == (256 - 16) * 3


async def test_generate_mode_parses_verdict_lines_with_a_text_template(
    judge_client: httpx.AsyncClient,
) -> None:
    body = {
        "prompt": "Q",
        "response_a": "meh",
        "response_b": "GOOD",
        "mode": "generate",
        "template": "pairwise_generate@1",
    }
    data = (await judge_client.post("/v1/judge/pairwise", json=body)).json()
    assert data["winner"] == "b" and data["judge"]["template"] == "pairwise_generate@1"
    assert data["orders"][0]["reply"].endswith("[[B]]")
    assert {o["verdict_source"] for o in data["orders"]} == {"parsed"}
    assert data["judge"]["sampling"]["structured"] == 0
    unclear = {**body, "response_a": "UNCLEAR", "verdict_fallback": "none"}
    data = (await judge_client.post("/v1/judge/pairwise", json=unclear)).json()
    assert data["winner"] == "tie" and data["status"] == "unparseable"
    assert data["judge"]["sampling"]["verdict_fallback"] == 0


async def test_generate_mode_scores_the_verdict_after_an_invalid_json_reply(
    judge_client: httpx.AsyncClient, scripted: ScriptedBackend
) -> None:
    body = {"prompt": "Q", "response_a": "UNCLEAR", "response_b": "GOOD", "mode": "generate"}
    data = (await judge_client.post("/v1/judge/pairwise", json=body)).json()
    assert data["status"] == "ok" and data["winner"] == "b", data
    assert [o["verdict_source"] for o in data["orders"]] == ["scored", "scored"]
    assert data["orders"][0]["reply"] == '{"analysis": "Both have merits.', "the reply is kept"
    assert data["judge"]["sampling"]["verdict_fallback"] == 1
    scored = scripted.calls[-1]
    assert len(scored) == 2 and all(
        r.assistant_prefix == '{"analysis": "Both have merits.", "verdict": "'
        for r in scored  # type: ignore[union-attr]
    ), "the letter is scored right after the judge's own reply, as the verdict field"
    without = {**body, "verdict_fallback": "none"}
    data = (await judge_client.post("/v1/judge/pairwise", json=without)).json()
    assert data["status"] == "unparseable" and data["winner"] == "tie"
    assert "not JSON" in data["orders"][0]["error"] or "cut" in data["orders"][0]["error"]


async def test_scale_distribution_feeds_ordinal(judge_client: httpx.AsyncClient) -> None:
    body = {"prompt": "Q", "completions": ["GOOD", "bad"], "k": 5}
    data = (await judge_client.post("/v1/judge/scale", json=body)).json()
    modes = [r["mode"] for r in data["results"]]
    assert modes == [4, 2]
    assert all(sum(r["distribution"]) == pytest.approx(1.0) for r in data["results"])
    adv = await judge_client.post(
        "/v1/ordinal/advantages", json={"groups": [{"scores": modes}], "k": 5}
    )
    assert adv.status_code == 200


async def test_cache_hits_and_opt_out(
    judge_client: httpx.AsyncClient, scripted: ScriptedBackend
) -> None:
    body = {"prompt": "Q", "completions": ["GOOD", "b", "c", "d"]}
    first = (await judge_client.post("/v1/judge/group", json=body)).json()
    second = (await judge_client.post("/v1/judge/group", json=body)).json()
    assert first["rewards"] == second["rewards"]
    assert [len(c) for c in scripted.calls] == [4], "the repeated group is served from the cache"
    await judge_client.post("/v1/judge/group", json={**body, "cache": False})
    assert [len(c) for c in scripted.calls] == [4, 4]
    metrics = (await judge_client.get("/metrics")).text
    assert 'plaudit_judge_cache_total{outcome="hit"} 4.0' in metrics


async def test_identical_requests_in_flight_share_one_backend_call(
    judge_client: httpx.AsyncClient, scripted: ScriptedBackend
) -> None:
    scripted.delay = 0.2
    body = {"prompt": "Q", "response_a": "GOOD", "response_b": "x"}
    first, second = await asyncio.gather(
        judge_client.post("/v1/judge/pairwise", json=body),
        judge_client.post("/v1/judge/pairwise", json=body),
    )
    assert first.json() == second.json()
    assert [len(c) for c in scripted.calls] == [2], (
        "the second request waited for the first one's call"
    )
    assert (
        'plaudit_judge_cache_total{outcome="shared"} 2.0'
        in (await judge_client.get("/metrics")).text
    )


BAD = [
    ("empty completions", "/v1/judge/group", {"prompt": "Q", "completions": []}, "completions"),
    ("one completion", "/v1/judge/group", {"prompt": "Q", "completions": ["a"]}, "completions"),
    (
        "G over the limit",
        "/v1/judge/group",
        {"prompt": "Q", "completions": ["a"] * 9},
        "completions",
    ),
    (
        "too many pairs",
        "/v1/judge/group",
        {"prompt": "Q", "completions": ["a"] * 8, "pairing": "round_robin"},
        "budget",
    ),
    (
        "unknown template",
        "/v1/judge/pairwise",
        {"prompt": "Q", "response_a": "a", "response_b": "b", "template": "nope@3"},
        "template",
    ),
    (
        "wrong template kind",
        "/v1/judge/pairwise",
        {"prompt": "Q", "response_a": "a", "response_b": "b", "template": "pairwise_generate@1"},
        "template",
    ),
    ("K too large", "/v1/judge/scale", {"prompt": "Q", "completions": ["a"], "k": 101}, "k"),
    ("K too small", "/v1/judge/scale", {"prompt": "Q", "completions": ["a"], "k": 1}, "k"),
    (
        "anchor missing",
        "/v1/judge/group",
        {"prompt": "Q", "completions": ["a", "b"], "pairing": "anchor"},
        None,
    ),
    (
        "lengths mismatch",
        "/v1/judge/group",
        {"prompt": "Q", "completions": ["a", "b"], "lengths": [1]},
        None,
    ),
    (
        "bad role",
        "/v1/judge/pairwise",
        {"prompt": [{"role": "robot", "content": "x"}], "response_a": "a", "response_b": "b"},
        None,
    ),
    (
        "unknown mode",
        "/v1/judge/pairwise",
        {"prompt": "Q", "response_a": "a", "response_b": "b", "mode": "vibes"},
        "mode",
    ),
]


@pytest.mark.parametrize(("name", "path", "body", "param"), BAD, ids=[b[0] for b in BAD])
async def test_bad_input(
    judge_client: httpx.AsyncClient, name: str, path: str, body: dict, param: str | None
) -> None:  # type: ignore[type-arg]
    assert_envelope(await judge_client.post(path, json=body), 422, param)


async def test_judged_groups_are_stored_for_the_run(judge_client: httpx.AsyncClient) -> None:
    body = {"prompt": "Q", "completions": ["GOOD", "b"], "run_id": "judge-run", "step": 1}
    await judge_client.post("/v1/judge/group", json=body)
    await judge_client.post("/v1/judge/scale", json={**body, "completions": ["GOOD"]})
    stored = (await judge_client.get("/v1/runs/judge-run/groups")).json()["items"]
    assert [g["service"] for g in stored] == ["judge.group", "judge.scale"]
    assert stored[0]["result"]["rewards"] == [1.0, -1.0]


async def test_input_too_long_for_the_judge_is_the_callers_data_not_a_503(
    judge_client: httpx.AsyncClient,
) -> None:
    pair = {"prompt": "Q TOOLONG", "response_a": "a", "response_b": "b"}
    r = await judge_client.post("/v1/judge/pairwise", json=pair)
    assert assert_envelope(r, 422)["type"] == "invalid_request"
    scale = {"prompt": "Q TOOLONG", "completions": ["a", "b"], "k": 5}
    data = (await judge_client.post("/v1/judge/scale", json=scale)).json()
    assert [x["status"] for x in data["results"]] == ["invalid", "invalid"]
    assert all(x["expected"] is None for x in data["results"])
    group = {"prompt": "Q TOOLONG", "completions": ["a", "b", "c", "d"]}
    data = (await judge_client.post("/v1/judge/group", json=group)).json()
    assert data["status"] == ["invalid"] * 4 and data["rewards"] == [None] * 4
