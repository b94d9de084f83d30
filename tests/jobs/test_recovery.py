"""Jobs of dead processes: a killed server (in-process runner) or worker (arq) leaves a
running record; the next start of the service fails it with a reason, while the jobs of live
processes are left alone."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import update

from services.core import db
from services.core.jobs.store import JobStore
from services.core.models import Job, utcnow
from tests.jobs.conftest import (
    ALICE,
    IDLE_JUDGE,
    KEYS,
    Runner,
    jobs_env,
    process,
    started,
    with_jobs,
)
from tests.judge_service.scripted import ScriptedBackend
from tests.serving import free_port

pytestmark = pytest.mark.slow


@pytest.fixture
async def store(runner: Runner) -> AsyncIterator[JobStore]:
    """The runner's job records, read directly (no app start, so no sweep)."""
    url = runner.settings.resolved_database_url
    if runner.settings.auto_migrate:  # the embedded SQLite file (Postgres is migrated already)
        await db.upgrade_async(url)
    engine = db.make_engine(url)
    yield JobStore(db.make_sessionmaker(engine))
    await engine.dispose()


async def _poll(store: JobStore, job_id: str, state: str, within: float = 120.0) -> Job:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        job = await store.get(job_id)
        if job is not None and job.state == state and (state != "running" or job.progress_done):
            return job
        await asyncio.sleep(0.1)
    job = await store.get(job_id)
    pytest.fail(f"job {job_id} never {state}: {job and (job.state, job.error, job.worker)}")


async def _start_victim_job(runner: Runner, tmp_path: Path, judge: ScriptedBackend) -> Any:
    """A process that holds a long probe job: ``plaudit serve judge`` running it in-process,
    or a ``plaudit worker`` on its own queue. Returns (process context, job id)."""
    probe = {"steps": 1000, "delay_s": 0.1}
    env = jobs_env(runner.settings, **IDLE_JUDGE, PLAUDIT_API_KEYS=json.dumps(KEYS))
    if runner.name == "inprocess":
        port = free_port()
        argv = ["serve", "judge", "--host", "127.0.0.1", "--port", str(port)]
        victim = process(argv, env, tmp_path / "victim.log")
        proc = victim.__enter__()
        job_id = await _post_when_up(f"http://127.0.0.1:{port}", probe, proc, tmp_path)
        return victim, proc, job_id
    env["PLAUDIT_JOBS_QUEUE_NAME"] = "plaudit:jobs:victim"
    victim = process(["worker"], env, tmp_path / "victim.log")
    proc = victim.__enter__()
    settings = with_jobs(runner.settings, queue_name="plaudit:jobs:victim")
    async with started(settings, judge) as app:
        job = await app.state.resources.jobs.submit("jobs.probe", probe, owner=ALICE)
    return victim, proc, job.id


async def _post_when_up(url: str, probe: dict[str, Any], proc: Any, tmp_path: Path) -> str:
    headers = {"Authorization": "Bearer alice-key"}
    async with httpx.AsyncClient(base_url=url, headers=headers) as client:
        for _ in range(600):
            assert proc.poll() is None, (tmp_path / "victim.log").read_text()
            try:
                response = await client.post("/v1/jobs/probe", json=probe)
            except httpx.TransportError:
                await asyncio.sleep(0.2)
                continue
            if response.status_code == 202:
                return str(response.json()["id"])
            assert response.status_code == 503, response.text  # 503: still starting
            await asyncio.sleep(0.2)
    pytest.fail("the victim server never took the job")


async def test_the_next_start_fails_a_dead_process_job_and_spares_a_live_one(
    runner: Runner, store: JobStore, tmp_path: Path
) -> None:
    judge = ScriptedBackend()
    victim, proc, job_id = await _start_victim_job(runner, tmp_path, judge)
    try:
        running = await _poll(store, job_id, "running")
        assert running.worker is not None and f":{proc.pid}:" in running.worker
        # A service start while the holder lives (past one lease) leaves the job alone.
        async with started(runner.settings, judge):
            await asyncio.sleep(runner.settings.jobs.lease_s + 0.5)
        alive = await store.get(job_id)
        assert alive is not None and alive.state == "running", alive and alive.error
        proc.kill()
        proc.wait()
        async with started(runner.settings, judge):
            dead = await store.get(job_id)
    finally:
        victim.__exit__(None, None, None)
    assert dead is not None and dead.state == "failed"
    assert dead.error == f"the process running it ({running.worker}) is gone"
    assert dead.finished_at is not None


async def test_a_stale_lease_fails_a_job_held_on_another_host(
    runner: Runner, store: JobStore
) -> None:
    """Another host's process cannot be checked by pid: its lease decides."""
    silent = await store.create("jobs.probe", {}, owner=None, worker="elsewhere:7:worker-a")
    beating = await store.create("jobs.probe", {}, owner=None, worker="elsewhere:8:worker-b")
    waiting = await store.create("jobs.probe", {}, owner=None)  # on a queue, held by no one
    await store.claim(silent.id, "elsewhere:7:worker-a")
    old = utcnow() - timedelta(seconds=runner.settings.jobs.lease_s + 5)
    async with store._sessions() as session, session.begin():
        await session.execute(update(Job).where(Job.id == silent.id).values(heartbeat_at=old))
    async with started(runner.settings, ScriptedBackend()):
        pass
    failed = await store.get(silent.id)
    assert failed is not None and failed.state == "failed"
    assert failed.error is not None and "stopped renewing its lease" in failed.error
    for kept in (beating.id, waiting.id):
        job = await store.get(kept)
        assert job is not None and job.state == "queued"


@pytest.mark.parametrize("runner", ["arq"], indirect=True)  # only a Redis queue loses jobs
async def test_arq_fails_a_queued_job_that_redis_lost(runner: Runner, store: JobStore) -> None:
    lost = await store.create("jobs.probe", {}, owner=None)  # never enqueued on Redis
    long_ago = utcnow() - timedelta(seconds=runner.settings.jobs.lease_s + 5)
    async with store._sessions() as session, session.begin():
        await session.execute(update(Job).where(Job.id == lost.id).values(created_at=long_ago))
    async with started(runner.settings, ScriptedBackend()):
        pass
    job = await store.get(lost.id)
    assert job is not None and job.state == "failed"
    assert job.error == "it is no longer on the Redis queue"


async def test_a_stopped_process_fails_its_running_job_on_the_way_out(
    runner: Runner, store: JobStore, tmp_path: Path
) -> None:
    """SIGTERM (docker stop): the server or worker records why its job ended, then exits."""
    victim, proc, job_id = await _start_victim_job(runner, tmp_path, ScriptedBackend())
    try:
        await _poll(store, job_id, "running")
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=60)
    finally:
        victim.__exit__(None, None, None)
    job = await store.get(job_id)
    assert job is not None and job.state == "failed"
    assert job.error == "the process stopped while the job ran"
    # uvicorn re-raises the signal once shut down cleanly; the worker returns 0.
    assert code in (0, -signal.SIGTERM), (tmp_path / "victim.log").read_text()
