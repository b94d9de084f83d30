"""``plaudit worker`` rides out a Redis outage (issue 23, finding 3): its own redis-server is
killed and started again; the worker waits, logging each wait, and runs the jobs accepted once
Redis is back. Before the fix it exited on the first ``ConnectionError``."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import pytest

from services.core.db import engine as db
from services.core.db.tables import Job
from services.core.jobs.store import JobStore
from services.settings import Settings
from tests.services.core.jobs.conftest import (
    ALICE,
    IDLE_JUDGE,
    jobs_env,
    process,
    started,
    with_jobs,
)
from tests.services.core.web.faults import RedisServer
from tests.services.judge.scripted import ScriptedBackend

pytestmark = pytest.mark.slow


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path)
    server.start()
    yield server
    server.kill()


@pytest.fixture
async def store(deployed_settings: Settings) -> AsyncIterator[JobStore]:
    engine = db.make_engine(deployed_settings.resolved_database_url)
    yield JobStore(db.make_sessionmaker(engine))
    await engine.dispose()


async def _until(check: Callable[[], Awaitable[bool]], what: str, *, within: float = 120) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if await check():
            return
        await asyncio.sleep(0.1)
    pytest.fail(f"never: {what}")


async def _run_probe(settings: Settings, store: JobStore) -> Job:
    async with started(settings, ScriptedBackend()) as app:
        job = await app.state.resources.jobs.submit(
            "jobs.probe", {"steps": 2, "delay_s": 0}, owner=ALICE
        )

    async def done() -> bool:
        row = await store.get(job.id)
        return row is not None and row.state in ("succeeded", "failed", "cancelled")

    await _until(done, f"job {job.id} finished")
    finished = await store.get(job.id)
    assert finished is not None
    return finished


async def test_the_worker_waits_out_a_redis_outage_and_runs_later_jobs(
    deployed_settings: Settings, own_redis: RedisServer, store: JobStore, tmp_path: Path
) -> None:
    settings = with_jobs(
        deployed_settings.model_copy(update={"redis_url": own_redis.url}),
        heartbeat_s=0.2,
        lease_s=2.0,
    )
    env = jobs_env(
        settings,
        **IDLE_JUDGE,
        PLAUDIT_JOBS_REDIS_RETRY_MIN_S="0.2",
        PLAUDIT_JOBS_REDIS_RETRY_MAX_S="1",
    )
    log = tmp_path / "worker.log"
    with process(["worker"], env, log) as worker:
        before = await _run_probe(settings, store)
        assert before.state == "succeeded", before.error

        own_redis.kill()

        async def waited_twice() -> bool:
            return log.read_text().count("waiting") >= 2

        await _until(waited_twice, "the worker logged two waits for Redis")
        assert worker.poll() is None, log.read_text()

        own_redis.start()  # the same port, an empty Redis
        after = await _run_probe(settings, store)
        assert after.state == "succeeded", after.error
        assert worker.poll() is None, log.read_text()
    text = log.read_text()
    assert "Redis is unreachable" in text
    assert "the worker resumes" in text
