"""Every way the database or Redis can fail to serve is a 503 with Retry-After (issue 23).

Postgres faults run on a cluster of the test's own (``PostgresCluster``: refused, stopped,
not accepting connections, read-only, too many connections, lock and statement timeouts);
SQLite is held locked by another connection; Redis faults run on a redis-server of the test's
own (killed, stopped answering, read-only replica, out of memory, max clients). Each checks the
answer through the app and that the service heals once the fault is undone.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
import redis.asyncio as aioredis
from fastapi import FastAPI
from sqlalchemy.engine import make_url

from services.core.errors import CacheUnavailable
from services.core.models.embedder import Embedder
from services.core.outages import as_outage
from services.settings import Settings
from tests import conftest as shared
from tests.conftest import assert_envelope
from tests.services.core.web.faults import PostgresCluster, RedisServer
from tests.services.judge.scripted import ScriptedBackend

ORDINAL = {"groups": [{"scores": [1, 4, 3]}], "k": 5, "run_id": "outage"}


@asynccontextmanager
async def _serve(settings: Settings, embedder: Embedder) -> AsyncIterator[httpx.AsyncClient]:
    app: FastAPI = shared.create_app(settings, embedder=embedder, judge_backend=ScriptedBackend())
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            yield client


def _is_outage_503(response: httpx.Response, error_type: str) -> None:
    error = assert_envelope(response, 503)
    assert error["type"] == error_type, error
    assert int(response.headers["retry-after"]) >= 1


async def _heals(client: httpx.AsyncClient, send: Callable[[], Awaitable[httpx.Response]]) -> None:
    for _ in range(200):  # the pool reconnects on its own; every answer meanwhile is a 503
        response = await send()
        if response.status_code < 300:
            return
        assert response.status_code == 503, response.text
        await asyncio.sleep(0.05)
    raise AssertionError("the service did not heal")


# --- Postgres -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster() -> Iterator[PostgresCluster]:
    shared.require_services()
    own = PostgresCluster()
    try:
        own.init()
        yield own
    finally:
        own.destroy()


class _Lock:
    """A superuser transaction holding scored_groups exclusively, so the app's write waits."""

    def __init__(self, cluster: PostgresCluster) -> None:
        self._cluster = cluster
        self._conn: asyncpg.Connection | None = None  # type: ignore[type-arg]

    async def take(self) -> None:
        self._conn = await asyncpg.connect(
            host="127.0.0.1", port=self._cluster.port, user="postgres", database="plaudit"
        )
        await self._conn.execute("BEGIN; LOCK TABLE scored_groups IN ACCESS EXCLUSIVE MODE")

    async def release(self) -> None:
        if self._conn is not None:
            await self._conn.close()
            self._conn = None


def _pg_faults(cluster: PostgresCluster, lock: _Lock) -> dict[str, tuple[Any, Any]]:
    """fault name -> (make it so, undo it); each may return an awaitable."""
    role = "ALTER ROLE app"
    return {
        "stopped": (cluster.stop, cluster.start),
        "not_accepting_connections": (
            lambda: cluster.sql("postgres", "ALTER DATABASE plaudit ALLOW_CONNECTIONS false"),
            lambda: cluster.sql("postgres", "ALTER DATABASE plaudit ALLOW_CONNECTIONS true"),
        ),
        "read_only": (
            lambda: cluster.sql(
                "postgres", "ALTER DATABASE plaudit SET default_transaction_read_only = on"
            ),
            lambda: cluster.sql("postgres", "ALTER DATABASE plaudit RESET ALL"),
        ),
        "too_many_connections": (
            lambda: cluster.sql("postgres", f"{role} CONNECTION LIMIT 0"),
            lambda: cluster.sql("postgres", f"{role} CONNECTION LIMIT -1"),
        ),
        "lock_timeout": (
            lambda: _then(cluster.sql("postgres", f"{role} SET lock_timeout = '100ms'"), lock),
            lambda: _undo_timeout(cluster, lock),
        ),
        "statement_timeout": (
            lambda: _then(cluster.sql("postgres", f"{role} SET statement_timeout = '100ms'"), lock),
            lambda: _undo_timeout(cluster, lock),
        ),
    }


async def _then(_: None, lock: _Lock) -> None:
    await lock.take()


async def _undo_timeout(cluster: PostgresCluster, lock: _Lock) -> None:
    await lock.release()
    cluster.sql("postgres", "ALTER ROLE app RESET ALL")


async def _call(action: Callable[[], Any]) -> None:
    result = action()
    if asyncio.iscoroutine(result):
        await result


FAULTS = [
    "stopped",
    "not_accepting_connections",
    "read_only",
    "too_many_connections",
    "lock_timeout",
    "statement_timeout",
]


@pytest.mark.parametrize("fault", FAULTS)
async def test_a_postgres_that_cannot_serve_is_a_503(
    fault: str, cluster: PostgresCluster, embedder: Embedder, tmp_path: Path
) -> None:
    settings = Settings(  # type: ignore[call-arg]
        data_dir=tmp_path / "data", database_url=cluster.url(), _env_file=None
    )
    lock = _Lock(cluster)
    make, undo = _pg_faults(cluster, lock)[fault]
    async with _serve(settings, embedder) as client:

        async def store() -> httpx.Response:
            return await client.post("/v1/ordinal/advantages", json=ORDINAL)

        assert (await store()).status_code == 200
        try:
            await _call(make)
            if fault != "stopped":
                cluster.terminate_app_connections()  # new sessions meet the fault
            _is_outage_503(await store(), "database_unavailable")
            if fault not in ("lock_timeout", "statement_timeout", "read_only"):
                _is_outage_503(await client.get("/v1/runs"), "database_unavailable")
        finally:
            await _call(undo)
            if fault != "stopped":
                cluster.terminate_app_connections()  # sessions keep the settings they began with
        await _heals(client, store)


# --- SQLite ---------------------------------------------------------------------------------


async def test_a_locked_sqlite_database_is_a_503(
    embedded_settings: Settings, embedder: Embedder
) -> None:
    async with _serve(embedded_settings, embedder) as client:
        assert (await client.post("/v1/ordinal/advantages", json=ORDINAL)).status_code == 200
        path = make_url(embedded_settings.resolved_database_url).database
        holder = sqlite3.connect(str(path), isolation_level=None)
        try:
            holder.execute("BEGIN EXCLUSIVE")
            locked = await client.post("/v1/ordinal/advantages", json=ORDINAL)
            _is_outage_503(locked, "database_unavailable")
        finally:
            holder.close()
        assert (await client.post("/v1/ordinal/advantages", json=ORDINAL)).status_code == 200


# --- Redis ----------------------------------------------------------------------------------


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path)
    server.start()
    yield server
    server.kill()


async def _admin(server: RedisServer, *command: str) -> None:
    client = aioredis.Redis(port=server.port)
    try:
        await client.execute_command(*command)
    finally:
        await client.aclose()


async def _redis_error(server: RedisServer) -> BaseException:
    """What a fresh client gets for a write now (the error, which the test expects)."""
    client = aioredis.Redis(port=server.port, socket_timeout=0.5, socket_connect_timeout=0.5)
    try:
        await client.set("plaudit:probe", "x")
    except Exception as exc:
        return exc
    finally:
        await client.aclose()
    raise AssertionError("the write went through")


REDIS_FAULTS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "read_only_replica": (("REPLICAOF", "127.0.0.1", "1"), ("REPLICAOF", "NO", "ONE")),
    "out_of_memory": (("CONFIG", "SET", "maxmemory", "1"), ("CONFIG", "SET", "maxmemory", "0")),
}


@pytest.mark.parametrize("fault", ["killed", "not_answering", "max_clients", *REDIS_FAULTS])
async def test_every_redis_fault_maps_to_cache_unavailable(
    fault: str, redis_server: RedisServer
) -> None:
    """The real error each fault raises in redis-py is classified as an outage."""
    if fault == "killed":
        redis_server.kill()
    elif fault == "not_answering":
        os.kill(redis_server.pid, signal.SIGSTOP)
    elif fault == "max_clients":
        await _admin(redis_server, "CONFIG", "SET", "maxclients", "1")
    else:
        await _admin(redis_server, *REDIS_FAULTS[fault][0])
    try:
        if fault == "max_clients":
            hog = aioredis.Redis(port=redis_server.port)
            await hog.ping()
        error = await _redis_error(redis_server)
    finally:
        if fault == "not_answering":
            os.kill(redis_server.pid, signal.SIGCONT)
        if fault == "max_clients":
            await hog.aclose()
    outage = as_outage(error)
    assert isinstance(outage, CacheUnavailable), repr(error)
    assert outage.status_code == 503 and int(outage.headers["Retry-After"]) >= 1


@pytest.mark.parametrize("fault", list(REDIS_FAULTS))
async def test_a_redis_that_refuses_writes_is_a_503_through_the_app(
    fault: str, deployed_settings: Settings, embedder: Embedder, redis_server: RedisServer
) -> None:
    """The judge keeps judging without its cache; the job queue answers 503 and heals."""
    settings = deployed_settings.model_copy(update={"redis_url": redis_server.url})
    make, undo = REDIS_FAULTS[fault]
    async with _serve(settings, embedder) as client:
        await _admin(redis_server, *make)
        try:
            judged = await client.post(
                "/v1/judge/scale", json={"prompt": "p", "k": 5, "completions": ["GOOD a", "b"]}
            )
            assert judged.status_code == 200, judged.text
            queued = await client.post("/v1/jobs/probe", json={})
            assert_envelope(queued, 503)
            assert int(queued.headers["retry-after"]) >= 1
        finally:
            await _admin(redis_server, *undo)
        await _heals(client, lambda: client.post("/v1/jobs/probe", json={}))
