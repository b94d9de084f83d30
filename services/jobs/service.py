"""The job API's logic: who sees which job, listing, cancelling, following progress."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import Any

from plaudit_wire.jobs import JobOut, JobPage, JobProgress
from services.core.db.tables import Job, as_utc
from services.core.errors import Conflict, NotFound
from services.core.jobs.queues import JobQueue
from services.core.jobs.store import FINISHED, JobState
from services.core.web.auth import Caller


def job_out(job: Job, *, full: bool = True) -> JobOut:
    """The wire form of a record; a summary leaves out params and result."""
    total = job.progress_total
    fraction = min(1.0, job.progress_done / total) if total else None
    return JobOut(
        id=job.id,
        kind=job.kind,
        state=job.state,
        progress=JobProgress(
            done=job.progress_done, total=total, stage=job.progress_stage, fraction=fraction
        ),
        owner=job.owner,
        cancel_requested=job.cancel_requested,
        created_at=as_utc(job.created_at),
        started_at=as_utc(job.started_at) if job.started_at else None,
        finished_at=as_utc(job.finished_at) if job.finished_at else None,
        worker=job.worker,
        attempts=job.attempts or 0,
        error=job.error,
        params=job.params if full else None,
        result=job.result if full else None,
    )


class JobsService:
    """Jobs as their starters see them: a reward key sees its own, an admin sees all."""

    def __init__(self, queue: JobQueue, *, poll_s: float = 0.5, keepalive_s: float = 15.0) -> None:
        self._queue = queue
        self._poll_s = poll_s
        self._keepalive_s = keepalive_s

    async def start(self, caller: Caller, kind: str, params: Mapping[str, Any]) -> JobOut:
        """Queue a job owned by ``caller``."""
        return job_out(await self._queue.submit(kind, params, owner=caller.owner), full=False)

    async def page(
        self,
        caller: Caller,
        *,
        kind: str | None,
        state: JobState | None,
        limit: int,
        offset: int,
    ) -> JobPage:
        rows, total = await self._queue.store.page(
            owner=caller.owner,
            everyone=caller.admin,
            kind=kind,
            state=state,
            limit=limit,
            offset=offset,
        )
        items = [job_out(row, full=False) for row in rows]
        return JobPage(items=items, limit=limit, offset=offset, total=total)

    async def get(self, caller: Caller, job_id: str, *, full: bool = True) -> JobOut:
        return job_out(await self._visible(caller, job_id), full=full)

    async def cancel(self, caller: Caller, job_id: str) -> JobOut:
        """Cancel a queued job now, or ask a running one to stop (it stops within a heartbeat)."""
        job = await self._visible(caller, job_id)
        if job.state in FINISHED:
            raise Conflict(f"job {job_id} already {job.state}", param="job_id")
        cancelled = await self._queue.cancel(job_id)
        return job_out(cancelled or job, full=False)

    async def follow(self, caller: Caller, job_id: str) -> AsyncIterator[JobOut | None]:
        """Yield the job whenever it changes, until it finishes; None after ``keepalive_s``
        without a change (the stream's keep-alive)."""
        last: tuple[Any, ...] | None = None
        quiet = 0.0
        job: Job | None = await self._visible(caller, job_id)
        while job is not None:
            seen = (job.state, job.progress_done, job.progress_total, job.progress_stage)
            if seen != last:
                last, quiet = seen, 0.0
                yield job_out(job, full=job.state in FINISHED)
            elif quiet >= self._keepalive_s:
                quiet = 0.0
                yield None
            if job.state in FINISHED:
                return
            await asyncio.sleep(self._poll_s)
            quiet += self._poll_s
            job = await self._queue.store.get(job_id)

    async def _visible(self, caller: Caller, job_id: str) -> Job:
        job = await self._queue.store.get(job_id)
        if job is None or not (caller.admin or job.owner == caller.owner):
            raise NotFound(f"no job {job_id!r} (or it expired)", param="job_id")
        return job
