"""Outages answer 503 with Retry-After and heal without a restart (issue 9).

A redis-server owned by the test is killed and restarted mid-loop; Postgres connections are
terminated (``pg_terminate_backend``) or refused (a proxy the test owns) mid-loop. No answer is
a 500, every accepted write is stored exactly once, and a request whose store fails leaves
nothing behind. Postgres set-up only (SQLite and the in-process cache have no outage to test).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy.engine import make_url

from judges.backends.base import ChoiceRequest, ChoiceResult
from services.core.models.embedder import Embedder
from services.settings import Settings
from tests import conftest as shared
from tests.conftest import assert_envelope
from tests.services.core.web.faults import PostgresProxy, RedisServer
from tests.services.judge.scripted import ScriptedBackend

SCALE = {"prompt": "Name a colour.", "k": 5}
FAST_LEASE = {"lease_s": 0.5, "wait_s": 30.0}


@asynccontextmanager
async def _serve(
    settings: Settings, embedder: Embedder, judge: Any = None
) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    app: FastAPI = shared.create_app(
        settings, embedder=embedder, judge_backend=judge or ScriptedBackend()
    )
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            yield app, client


def _fast_lease(settings: Settings, **fields: Any) -> Settings:
    idempotency = settings.idempotency.model_copy(update=FAST_LEASE)
    return settings.model_copy(update={"idempotency": idempotency, **fields})


def _metric(app: FastAPI, name: str, **labels: str) -> float:
    value = app.state.metrics.registry.get_sample_value(name, labels)
    return float(value or 0.0)


def _ordinal(step: int, run_id: str = "faults") -> dict[str, Any]:
    return {"groups": [{"scores": [1, step % 5 + 1, 3]}], "k": 5, "run_id": run_id, "step": step}


async def _until_ok(
    client: httpx.AsyncClient, path: str, body: dict[str, Any], key: str, seen: list[int]
) -> httpx.Response:
    """Retry like the trainer client: every non-200 must be a 503 naming what is down."""
    for _ in range(400):
        response = await client.post(path, json=body, headers={"Idempotency-Key": key})
        seen.append(response.status_code)
        if response.status_code == 200:
            return response
        error = assert_envelope(response, 503)
        assert error["type"] in ("database_unavailable", "cache_unavailable"), error
        assert int(response.headers["retry-after"]) >= 1
        await asyncio.sleep(0.05)
    raise AssertionError(f"never recovered: {seen[-10:]}")


async def _stored_steps(client: httpx.AsyncClient, run_id: str) -> list[int]:
    page = (await client.get(f"/v1/runs/{run_id}/groups", params={"limit": 1000})).json()
    return sorted(g["step"] for g in page["items"])


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path)
    server.start()
    yield server
    server.kill()


async def test_the_judge_works_without_redis_and_uses_it_again(
    deployed_settings: Settings, embedder: Embedder, redis_server: RedisServer
) -> None:
    settings = deployed_settings.model_copy(update={"redis_url": redis_server.url})
    async with _serve(settings, embedder) as (app, client):
        warm = {**SCALE, "completions": ["GOOD red", "blue"]}
        assert (await client.post("/v1/judge/scale", json=warm)).status_code == 200
        redis_server.kill()
        for i in range(6):
            body = {**SCALE, "completions": [f"GOOD {i}", "blue"], "run_id": "r", "step": i}
            judged = await client.post("/v1/judge/scale", json=body)
            assert judged.status_code == 200, judged.text
            assert all(r["status"] == "ok" for r in judged.json()["results"])
            assert (
                await client.post("/v1/ordinal/advantages", json=_ordinal(i))
            ).status_code == 200
        assert _metric(app, "plaudit_judge_cache_total", outcome="unavailable") >= 6
        assert_envelope(await client.get("/health/ready"), 503)
        redis_server.start()  # empty: it keeps nothing on disk
        hits = []
        for _ in range(2):
            assert (await client.post("/v1/judge/scale", json=warm)).status_code == 200
            hits.append(_metric(app, "plaudit_judge_cache_total", outcome="hit"))
        assert hits[1] > hits[0], "the restarted Redis caches verdicts again"
        assert (await client.get("/health/ready")).status_code == 200
        assert await _stored_steps(client, "r") == list(range(6))


async def _terminate_others(url: str, rounds: int) -> int:
    """``pg_terminate_backend`` every other connection to the test database, ``rounds`` times
    at 0.1 s intervals; returns how many connections it ended."""
    parsed = make_url(url)
    conn = await asyncpg.connect(
        host=parsed.host, port=parsed.port or 5432, user=parsed.username, database=parsed.database
    )
    killed = 0
    try:
        for _ in range(rounds):
            killed += len(
                await conn.fetch(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
            )
            await asyncio.sleep(0.1)
    finally:
        await conn.close()
    return killed


async def test_terminated_connections_lose_no_write(
    deployed_settings: Settings, embedder: Embedder
) -> None:
    seen: list[int] = []
    answers: list[Any] = []
    async with _serve(_fast_lease(deployed_settings), embedder) as (_, client):
        terminator = asyncio.create_task(
            _terminate_others(deployed_settings.resolved_database_url, rounds=15)
        )
        try:
            while not terminator.done() or len(answers) < 5:
                step = len(answers)
                response = await _until_ok(
                    client, "/v1/ordinal/advantages", _ordinal(step), f"s{step}", seen
                )
                answers.append(response.json())
        finally:
            killed = await terminator
        assert killed > 0 and 503 in seen, "the faults must have hit requests"
        assert await _stored_steps(client, "faults") == list(range(len(answers)))
        replay = await _until_ok(client, "/v1/ordinal/advantages", _ordinal(3), "s3", seen)
        assert replay.json() == answers[3]
    assert 500 not in seen


@pytest.fixture
async def proxy() -> AsyncIterator[PostgresProxy]:
    target = make_url(shared.PG_URL)
    proxy = PostgresProxy(target.host or "127.0.0.1", target.port or 5432)
    await proxy.accept()
    yield proxy
    await proxy.refuse()


def _through(settings: Settings, proxy: PostgresProxy) -> Settings:
    url = make_url(settings.resolved_database_url).set(host="127.0.0.1", port=proxy.port)
    return _fast_lease(settings, database_url=url.render_as_string(hide_password=False))


async def test_a_refusing_database_is_a_503_and_heals(
    deployed_settings: Settings, embedder: Embedder, proxy: PostgresProxy
) -> None:
    seen: list[int] = []
    async with _serve(_through(deployed_settings, proxy), embedder) as (_, client):
        await _until_ok(client, "/v1/ordinal/advantages", _ordinal(0), "s0", seen)
        await proxy.refuse()
        down = await client.post(
            "/v1/ordinal/advantages", json=_ordinal(1), headers={"Idempotency-Key": "s1"}
        )
        assert assert_envelope(down, 503)["type"] == "database_unavailable"
        assert down.headers["retry-after"] == "2"
        unstored = await client.post("/v1/ordinal/advantages", json={**_ordinal(1), "run_id": None})
        assert unstored.status_code == 200, "a request that stores nothing needs no database"
        assert (await client.get("/health/ready")).status_code == 503
        listing = await client.get("/v1/runs/faults/groups")
        assert assert_envelope(listing, 503)["type"] == "database_unavailable"
        await proxy.accept()
        await _until_ok(client, "/v1/ordinal/advantages", _ordinal(1), "s1", seen)
        assert await _stored_steps(client, "faults") == [0, 1]
        assert (await client.get("/health/ready")).status_code == 200
    assert 500 not in seen


class _CutsTheDatabase(ScriptedBackend):
    """A judge during whose first call the database goes away: the request has claimed its
    key and scored its group, and can no longer store either."""

    def __init__(self, proxy: PostgresProxy) -> None:
        super().__init__()
        self._proxy: PostgresProxy | None = proxy

    async def score_choices(self, requests: Sequence[ChoiceRequest]) -> list[ChoiceResult]:
        if self._proxy is not None:
            await self._proxy.refuse()
            self._proxy = None
        return await super().score_choices(requests)


async def test_a_store_that_fails_leaves_nothing_and_a_retry_stores_once(
    deployed_settings: Settings, embedder: Embedder, proxy: PostgresProxy
) -> None:
    settings = _through(deployed_settings, proxy)
    body = {**SCALE, "completions": ["GOOD a", "b"], "run_id": "cut", "step": 1}
    headers = {"Idempotency-Key": "cut-1"}
    async with _serve(settings, embedder, _CutsTheDatabase(proxy)) as (_, client):
        failed = await client.post("/v1/judge/scale", json=body, headers=headers)
        assert assert_envelope(failed, 503)["type"] == "database_unavailable"
        await proxy.accept()
        seen: list[int] = []
        # The dead claim could not be released while the database was away: its lease lapses.
        retried = await _until_ok(client, "/v1/judge/scale", body, "cut-1", seen)
        assert retried.json()["results"][0]["status"] == "ok"
        assert await _stored_steps(client, "cut") == [1]
        assert 500 not in seen
