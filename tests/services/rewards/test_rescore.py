"""Audit and rescoring (issue 10): stored reward groups keep their texts, and a run is scored
again with another spec as a job that reports how the two scorings agree.

The scripted judge grades "GOOD" 4 and anything else 2; diversity runs on the real MiniLM.
Jobs run in-process (embedded set-up); the arq path is the same job function.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from services.app import create_app
from services.core.models.embedder import Embedder
from services.rewards.rescore import advantage_signs, average_ranks, compare, rank_correlation
from services.settings import Settings
from tests.conftest import assert_envelope
from tests.services.judge.scripted import ScriptedBackend

JUDGE = {"channels": {"judge_scale": {"k": 5}}}
DIVERSITY = {"channels": {"diversity": {}}}
GROUPS = [
    ("Name a colour.", ["GOOD red", "blue", "GOOD green", "a cat sat on the mat"]),
    ("Name a prime.", ["GOOD 7", "9", "GOOD 11 is prime", "the sky"]),
]


def test_rank_correlation_and_signs() -> None:
    assert average_ranks([3.0, 1.0, 3.0]) == [2.5, 1.0, 2.5]
    assert rank_correlation([1, 2, 3], [10, 30, 20]) == pytest.approx(0.5)
    assert rank_correlation([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert rank_correlation([1, 1, 1], [1, 2, 3]) is None, "no spread: undefined"
    assert advantage_signs([1.0, 2.0, 3.0]) == [-1, 0, 1]
    assert compare([1.0, None, 3.0], [2.0, 5.0, 1.0]) == {
        "compared": 2,
        "spearman": -1.0,
        "same_sign": 0,
    }


async def _client(settings: Settings, embedder: Embedder) -> AsyncIterator[httpx.AsyncClient]:
    app: FastAPI = create_app(settings, embedder=embedder, judge_backend=ScriptedBackend())
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            yield client


@pytest.fixture
async def client(
    embedded_settings: Settings, embedder: Embedder
) -> AsyncIterator[httpx.AsyncClient]:
    async for c in _client(embedded_settings, embedder):
        yield c


async def _store_run(client: httpx.AsyncClient, run_id: str) -> None:
    for step, (prompt, completions) in enumerate(GROUPS):
        body = {"prompt": prompt, "completions": completions, "spec": JUDGE}
        response = await client.post(
            "/v1/rewards/group", json={**body, "run_id": run_id, "step": step}
        )
        assert response.status_code == 200, response.text


async def _finished(client: httpx.AsyncClient, location: str) -> dict[str, Any]:
    for _ in range(600):
        job: dict[str, Any] = (await client.get(location)).json()
        if job["state"] in ("succeeded", "failed", "cancelled"):
            return job
        await asyncio.sleep(0.1)
    pytest.fail(f"the rescore job never finished: {job}")


async def test_stored_groups_keep_their_texts(client: httpx.AsyncClient) -> None:
    await _store_run(client, "audit")
    page = (await client.get("/v1/runs/audit/groups")).json()
    first = page["items"][0]["inputs"]
    assert first["prompt"] == GROUPS[0][0]
    assert [c["text"] for c in first["completions"]] == GROUPS[0][1]


async def test_a_run_rescored_with_the_same_spec_agrees_fully_and_with_another_less(
    client: httpx.AsyncClient,
) -> None:
    await _store_run(client, "run-r")
    same = await client.post("/v1/runs/run-r/rescore", json={"spec": JUDGE})
    assert same.status_code == 202, same.text
    job = await _finished(client, same.headers["location"])
    assert job["state"] == "succeeded", job
    result = job["result"]
    assert (result["groups"], result["rescored"], result["skipped_without_texts"]) == (2, 2, 0)
    assert result["mean_spearman"] == pytest.approx(1.0)
    assert result["sign_agreement"] == pytest.approx(1.0)
    assert result["completions_compared"] == 8
    assert job["progress"]["done"] == job["progress"]["total"] == 2

    other = await client.post("/v1/runs/run-r/rescore", json={"spec": DIVERSITY, "step": 1})
    result = (await _finished(client, other.headers["location"]))["result"]
    assert result["groups"] == 1 and result["rescored"] == 1
    [group] = result["per_group"]
    assert group["status"] == "ok" and group["step"] == 1 and group["compared"] == 4
    assert -1.0 <= group["spearman"] <= 1.0 and group["spearman"] != pytest.approx(1.0)
    page = (await client.get("/v1/runs/run-r/groups")).json()
    assert page["total"] == 2, "rescoring stores nothing"


async def test_a_bad_spec_is_refused_before_the_job(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/runs/x/rescore", json={"spec": {"channels": {"nope": {}}}})
    assert_envelope(response, 422, "spec.channels.nope")


async def test_groups_stored_without_texts_are_skipped(
    embedded_settings: Settings, embedder: Embedder
) -> None:
    async for client in _client(embedded_settings.with_overrides(store_texts=False), embedder):
        await _store_run(client, "bare")
        page = (await client.get("/v1/runs/bare/groups")).json()
        assert all(g["inputs"] is None for g in page["items"])
        started = await client.post("/v1/runs/bare/rescore", json={"spec": JUDGE})
        result = (await _finished(client, started.headers["location"]))["result"]
        assert result["skipped_without_texts"] == 2 and result["rescored"] == 0
        assert result["mean_spearman"] is None


async def test_rescoring_an_unknown_run_is_404_not_an_empty_job(client: httpx.AsyncClient) -> None:
    """Issue 21: an unknown run was 202 and then 'succeeded' with 0 groups."""
    await _store_run(client, "known-run")
    response = await client.post("/v1/runs/no-such-run/rescore", json={"spec": JUDGE})
    assert_envelope(response, 404, "run_id")
    assert "no-such-run" in response.json()["error"]["message"]
    response = await client.post("/v1/runs/known-run/rescore", json={"spec": JUDGE, "step": 9})
    assert_envelope(response, 404, "step")
