"""Jobs that survive their process (issue 23, finding 4): a SIGKILLed server (in-process
runner) or worker (arq) leaves a running record; a live process notices within a lease (at
once on the same host, by pid) and the job runs again from its last checkpoint, up to
``jobs.max_attempts`` starts; the jobs of live processes are left alone."""

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

from services.core.db import engine as db
from services.core.db.tables import Job, utcnow
from services.core.jobs.store import JobStore
from tests.services.core.jobs.conftest import (
    ALICE,
    IDLE_JUDGE,
    KEYS,
    Runner,
    jobs_env,
    process,
    started,
    with_jobs,
)
from tests.services.judge.scripted import ScriptedBackend
from tests.serving import free_port

pytestmark = pytest.mark.slow

#: The queue of the workers a test starts (and kills), apart from the module's worker.
VICTIM_QUEUE = "plaudit:jobs:victim"


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


async def _start_victim_job(
    runner: Runner, tmp_path: Path, judge: ScriptedBackend, probe: dict[str, Any] | None = None
) -> Any:
    """A process that holds a probe job: ``plaudit serve judge`` running it in-process, or a
    ``plaudit worker`` on its own queue. Returns (process context, process, job id)."""
    probe = probe or {"steps": 1000, "delay_s": 0.1}
    env = jobs_env(runner.settings, **IDLE_JUDGE, PLAUDIT_API_KEYS=json.dumps(KEYS))
    if runner.name == "inprocess":
        port = free_port()
        argv = ["serve", "judge", "--host", "127.0.0.1", "--port", str(port)]
        victim = process(argv, env, tmp_path / "victim.log")
        proc = victim.__enter__()
        job_id = await _post_when_up(f"http://127.0.0.1:{port}", probe, proc, tmp_path)
        return victim, proc, job_id
    env["PLAUDIT_JOBS_QUEUE_NAME"] = VICTIM_QUEUE
    victim = process(["worker"], env, tmp_path / "victim.log")
    proc = victim.__enter__()
    settings = with_jobs(runner.settings, queue_name=VICTIM_QUEUE)
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


async def _finished(store: JobStore, job_id: str, within: float = 120.0) -> Job:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        job = await store.get(job_id)
        if job is not None and job.state in ("succeeded", "failed", "cancelled"):
            return job
        await asyncio.sleep(0.1)
    job = await store.get(job_id)
    pytest.fail(f"job {job_id} never finished: {job and (job.state, job.error, job.worker)}")


async def _past_checkpoint(store: JobStore, job_id: str, step: int) -> Job:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        job = await store.get(job_id)
        if job is not None and job.state == "running" and (job.checkpoint or 0) >= step:
            return job
        await asyncio.sleep(0.05)
    pytest.fail(f"job {job_id} never passed checkpoint {step}")


@pytest.mark.parametrize("runner", ["inprocess"], indirect=True)
async def test_a_killed_server_job_resumes_from_its_checkpoint_on_restart(
    runner: Runner, store: JobStore, tmp_path: Path
) -> None:
    judge = ScriptedBackend()
    # The job must outlive the wait of one lease below, or it ends before the kill.
    probe = {"steps": int((runner.settings.jobs.lease_s + 4.0) / 0.1), "delay_s": 0.1}
    victim, proc, job_id = await _start_victim_job(runner, tmp_path, judge, probe)
    try:
        running = await _past_checkpoint(store, job_id, 3)
        assert running.worker is not None and f":{proc.pid}:" in running.worker
        # A service start while the holder lives (past one lease) leaves the job alone.
        async with started(runner.settings, judge):
            await asyncio.sleep(runner.settings.jobs.lease_s + 0.5)
        alive = await store.get(job_id)
        assert alive is not None and alive.state == "running", alive and alive.error
        proc.kill()
        proc.wait()
        killed_at = (await store.get(job_id)).checkpoint  # type: ignore[union-attr]
        async with started(runner.settings, judge):  # the restart
            job = await _finished(store, job_id)
    finally:
        victim.__exit__(None, None, None)
    assert job.state == "succeeded", job.error
    assert job.attempts == 2 and job.error is None
    assert job.result["attempt"] == 2
    assert job.result["resumed_from"] == killed_at >= 3  # not from step 0


@pytest.mark.parametrize("runner", ["arq"], indirect=True)
async def test_a_killed_worker_job_is_noticed_and_resumed_by_another_worker(
    runner: Runner, store: JobStore, tmp_path: Path
) -> None:
    """Two workers on one queue; the one running the job is SIGKILLed; the other notices
    (no restart of anything) and finishes the job from its checkpoint."""
    env = jobs_env(runner.settings, **IDLE_JUDGE, PLAUDIT_JOBS_QUEUE_NAME=VICTIM_QUEUE)
    settings = with_jobs(runner.settings, queue_name=VICTIM_QUEUE)
    with (
        process(["worker"], env, tmp_path / "first.log") as first,
        process(["worker"], env, tmp_path / "second.log") as second,
    ):
        async with started(settings, ScriptedBackend()) as app:
            submitted = await app.state.resources.jobs.submit(
                "jobs.probe", {"steps": 30, "delay_s": 0.1}, owner=ALICE
            )
        running = await _past_checkpoint(store, submitted.id, 3)
        holder, other = (
            (first, second) if f":{first.pid}:" in str(running.worker) else (second, first)
        )
        assert f":{holder.pid}:" in str(running.worker)
        holder.kill()
        holder.wait()
        killed_at = (await store.get(submitted.id)).checkpoint  # type: ignore[union-attr]
        job = await _finished(store, submitted.id)
        assert other.poll() is None
    assert job.state == "succeeded", job.error
    assert job.attempts == 2 and job.error is None
    assert f":{other.pid}:" in str(job.worker)
    assert job.result["resumed_from"] == killed_at >= 3


async def _set(store: JobStore, job_id: str, **values: Any) -> None:
    async with store._sessions() as session, session.begin():
        await session.execute(update(Job).where(Job.id == job_id).values(**values))


async def test_a_stale_lease_resumes_a_job_held_on_another_host_until_its_attempts_run_out(
    runner: Runner, store: JobStore
) -> None:
    """Another host's process cannot be checked by pid: its lease decides."""
    silent = await store.create("jobs.probe", {"steps": 2}, owner=None, worker="elsewhere:7:a")
    spent = await store.create("jobs.probe", {}, owner=None, worker="elsewhere:7:a")
    beating = await store.create("jobs.probe", {}, owner=None, worker="elsewhere:8:b")
    waiting = await store.create("jobs.probe", {}, owner=None)  # on a queue, held by no one
    for job in (silent, spent):
        await store.claim(job.id, "elsewhere:7:a")
    old = utcnow() - timedelta(seconds=runner.settings.jobs.lease_s + 5)
    await _set(store, silent.id, heartbeat_at=old, checkpoint=1)
    attempts = runner.settings.jobs.max_attempts
    await _set(store, spent.id, heartbeat_at=old, attempts=attempts)
    await _set(store, beating.id, heartbeat_at=utcnow() + timedelta(hours=1))  # alive
    async with started(runner.settings, ScriptedBackend()):
        resumed = await _finished(store, silent.id)
    assert resumed.state == "succeeded", resumed.error
    assert resumed.attempts == 2 and resumed.result["resumed_from"] == 1
    failed = await store.get(spent.id)
    assert failed is not None and failed.state == "failed"
    assert failed.error is not None and "stopped renewing its lease" in failed.error
    assert failed.error.endswith(f"it started {attempts} times (jobs.max_attempts)")
    for kept in (beating.id, waiting.id):
        job = await store.get(kept)
        assert job is not None and job.state == "queued"


@pytest.mark.parametrize("runner", ["arq"], indirect=True)  # only a Redis queue loses jobs
async def test_arq_queues_again_a_job_that_redis_lost(runner: Runner, store: JobStore) -> None:
    lost = await store.create("jobs.probe", {"steps": 1}, owner=None)  # never on Redis
    long_ago = utcnow() - timedelta(seconds=runner.settings.jobs.lease_s + 5)
    await _set(store, lost.id, created_at=long_ago)
    async with started(runner.settings, ScriptedBackend()):
        pass
    job = await _finished(store, lost.id)  # run by the module's worker
    assert job.state == "succeeded", job.error
    assert job.attempts == 1


async def test_a_stopped_process_hands_its_running_job_back_for_a_retry(
    runner: Runner, store: JobStore, tmp_path: Path
) -> None:
    """SIGTERM (docker stop): the server or worker hands its job back, then exits; the next
    process to look resumes it."""
    probe = {"steps": 20, "delay_s": 0.1}
    victim, proc, job_id = await _start_victim_job(runner, tmp_path, ScriptedBackend(), probe)
    try:
        await _past_checkpoint(store, job_id, 1)
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=240)  # a process stops once its models finished loading
    finally:
        victim.__exit__(None, None, None)
    log = (tmp_path / "victim.log").read_text()
    assert f"job {job_id} handed back for a retry: this process is stopping" in log, log
    # uvicorn re-raises the signal once shut down cleanly; the worker returns 0.
    assert code in (0, -signal.SIGTERM), (tmp_path / "victim.log").read_text()
    async with started(runner.settings, ScriptedBackend()):  # arq: onto the module's worker
        again = await _finished(store, job_id)
    assert again.state == "succeeded" and again.attempts == 2, again.error
    assert again.result["resumed_from"] >= 1
