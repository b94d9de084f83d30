"""A cancel that races the write of a job's outcome must not leave the record ``running``.

The CI run of 2026-12-03 saw it once on the arq runner: the job's own progress call raised on
the cancel request, and while the runner wrote ``cancelled`` the heartbeat, seeing the same
request, cancelled the task in the middle of that write. Here the write is held open on an
event so the heartbeat's cancel lands inside it every time.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from services.core.db import engine as db
from services.core.jobs.context import JobContext, JobRegistry
from services.core.jobs.runner import JobRunner
from services.core.jobs.settings import JobsSettings
from services.core.jobs.store import FinalState, JobStore


class HeldFinishStore(JobStore):
    """A real store whose ``finish`` waits until the test lets it go on."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.finishing = asyncio.Event()
        self.release = asyncio.Event()

    async def finish(
        self,
        job_id: str,
        worker: str,
        state: FinalState,
        *,
        result: Any = None,
        error: str | None = None,
    ) -> bool:
        self.finishing.set()
        await self.release.wait()
        return await super().finish(job_id, worker, state, result=result, error=error)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[HeldFinishStore]:
    url = f"sqlite+aiosqlite:///{tmp_path / 'jobs.db'}"
    await db.upgrade_async(url)
    engine = db.make_engine(url)
    yield HeldFinishStore(db.make_sessionmaker(engine))
    await engine.dispose()


def _runner(store: JobStore, function: Any, **settings: Any) -> JobRunner:
    registry = JobRegistry()
    registry.register("race", function)
    return JobRunner(store, registry, JobsSettings(**settings), role="test")


async def _run_until_finishing(
    store: HeldFinishStore, function: Any
) -> tuple[JobRunner, str, asyncio.Task[None]]:
    runner = _runner(store, function)
    job = await store.create("race", {}, owner=None)
    task = asyncio.create_task(runner.execute(job.id))
    await asyncio.wait_for(store.finishing.wait(), 30)
    return runner, job.id, task


async def test_a_cancel_during_the_cancelled_write_still_records_it(
    store: HeldFinishStore,
) -> None:
    async def job(ctx: JobContext, params: dict[str, Any]) -> None:
        await store.request_cancel(ctx.job_id)
        await ctx.progress(1, 2, "working")  # raises JobCancelled: the request is seen

    runner, job_id, task = await _run_until_finishing(store, job)
    assert runner.cancel_local(job_id), "the job is still held while its outcome is written"
    store.release.set()
    await asyncio.wait_for(task, 30)
    record = await store.get(job_id)
    assert record is not None
    assert (record.state, record.error) == ("cancelled", "cancelled while running")


async def test_a_cancel_during_the_success_write_keeps_the_success(
    store: HeldFinishStore,
) -> None:
    async def job(ctx: JobContext, params: dict[str, Any]) -> dict[str, int]:
        return {"answer": 42}

    runner, job_id, task = await _run_until_finishing(store, job)
    runner.cancel_local(job_id)
    store.release.set()
    await asyncio.wait_for(task, 30)
    record = await store.get(job_id)
    assert record is not None
    assert (record.state, record.result) == ("succeeded", {"answer": 42})


async def test_a_job_with_no_cancellation_point_is_cancelled_after_the_grace(
    store: HeldFinishStore,
) -> None:
    store.release.set()
    entered, never = asyncio.Event(), asyncio.Event()

    async def job(ctx: JobContext, params: dict[str, Any]) -> None:
        entered.set()
        await never.wait()  # no progress call: only the task's cancellation stops it

    runner = _runner(store, job, cancel_grace_s=0.05)
    record = await store.create("race", {}, owner=None)
    task = asyncio.create_task(runner.execute(record.id))
    await asyncio.wait_for(entered.wait(), 30)
    assert runner.cancel_local(record.id)
    await asyncio.wait_for(task, 30)
    final = await store.get(record.id)
    assert final is not None
    assert (final.state, final.error) == ("cancelled", "cancelled while running")
