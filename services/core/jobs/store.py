"""Job records in the database: every state change is one conditional UPDATE.

The conditions make the races harmless: a job is claimed only while ``queued``, finished only
by the process that holds it, and a dead process's job is failed only if its lease did not
move meanwhile. Both runners (in-process and arq) and the sweepers share this store.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Literal, cast

from sqlalchemy import CursorResult, delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from sqlalchemy.sql import Update

from services.core.db.tables import Job, utcnow

JobState = Literal["queued", "running", "succeeded", "failed", "cancelled"]
FinalState = Literal["succeeded", "failed", "cancelled"]
ACTIVE: tuple[JobState, ...] = ("queued", "running")
FINISHED: tuple[JobState, ...] = ("succeeded", "failed", "cancelled")
MAX_ERROR_CHARS = 2000


class JobStore:
    """Reads and writes ``jobs`` rows."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self._sessions = sessions

    async def create(
        self,
        kind: str,
        params: Mapping[str, Any],
        *,
        owner: str | None,
        worker: str | None = None,
    ) -> Job:
        """A new ``queued`` record; ``worker`` holds it from the start (the in-process runner)."""
        now = utcnow()
        job = Job(
            id=uuid.uuid4().hex,
            kind=kind,
            state="queued",
            owner=owner,
            params=dict(params),
            progress_done=0,
            attempts=0,
            cancel_requested=False,
            worker=worker,
            heartbeat_at=now if worker else None,
            created_at=now,
        )
        async with self._sessions() as session, session.begin():
            session.add(job)
        return job

    async def get(self, job_id: str) -> Job | None:
        async with self._sessions() as session:
            return await session.get(Job, job_id)

    async def page(
        self,
        *,
        owner: str | None,
        everyone: bool,
        kind: str | None = None,
        state: JobState | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> tuple[list[Job], int]:
        """Newest first, with the total; ``everyone`` lists every owner's jobs (admins)."""
        query = select(Job)
        if not everyone:
            query = query.where(Job.owner == owner if owner is not None else Job.owner.is_(None))
        if kind is not None:
            query = query.where(Job.kind == kind)
        if state is not None:
            query = query.where(Job.state == state)
        counted = select(func.count()).select_from(query.subquery())
        ordered = query.order_by(Job.created_at.desc(), Job.id.desc()).limit(limit).offset(offset)
        async with self._sessions() as session:
            total = int((await session.execute(counted)).scalar_one())
            rows = list((await session.scalars(ordered)).all())
        return rows, total

    async def claim(self, job_id: str, worker: str) -> Job | None:
        """``queued`` -> ``running`` for ``worker``; None when it is no longer queued."""
        now = utcnow()
        claimed = await self._update(
            update(Job)
            .where(Job.id == job_id, Job.state == "queued")
            .values(
                state="running",
                worker=worker,
                started_at=now,
                heartbeat_at=now,
                attempts=Job.attempts + 1,
            )
        )
        return await self.get(job_id) if claimed else None

    async def report(self, job_id: str, done: int, total: int | None, stage: str | None) -> bool:
        """Store progress; returns whether a cancel was requested meanwhile."""
        values: dict[str, Any] = {"progress_done": done}
        if total is not None:
            values["progress_total"] = total
        if stage is not None:
            values["progress_stage"] = stage[:200]
        await self._update(update(Job).where(Job.id == job_id).values(**values))
        async with self._sessions() as session:
            flag = await session.scalar(select(Job.cancel_requested).where(Job.id == job_id))
        return bool(flag)

    async def finish(
        self,
        job_id: str,
        worker: str,
        state: FinalState,
        *,
        result: Any = None,
        error: str | None = None,
    ) -> bool:
        """Record the outcome, if ``worker`` still holds the running job."""
        return await self._update(
            update(Job)
            .where(Job.id == job_id, Job.state == "running", Job.worker == worker)
            .values(state=state, result=result, error=_clip(error), finished_at=utcnow())
        )

    async def save_checkpoint(self, job_id: str, worker: str, checkpoint: Any) -> bool:
        """Keep what the job needs to resume, if ``worker`` still holds the running job."""
        return await self._update(
            update(Job)
            .where(Job.id == job_id, Job.state == "running", Job.worker == worker)
            .values(checkpoint=checkpoint)
        )

    async def interrupt(self, job_id: str, worker: str, reason: str) -> bool:
        """Hand a running job back (its process is stopping): ``queued`` again, still marked
        with ``worker``, so that the next sweep after the process is gone resumes it."""
        return await self._update(
            update(Job)
            .where(Job.id == job_id, Job.state == "running", Job.worker == worker)
            .values(state="queued", error=_clip(reason))
        )

    async def requeue(self, job: Job, reason: str, *, worker: str | None) -> bool:
        """Queue ``job`` again for ``worker`` (None: whichever worker takes it from Redis), if
        it is still active and its lease has not moved since it was read; its checkpoint and
        attempt count stay."""
        return await self._update(
            update(Job)
            .where(Job.id == job.id, Job.state.in_(ACTIVE), _lease_unchanged(job))
            .values(
                state="queued",
                worker=worker,
                heartbeat_at=utcnow() if worker else None,
                error=_clip(f"retrying: {reason}"),
            )
        )

    async def request_cancel(self, job_id: str) -> Job | None:
        """A queued job is cancelled now; a running one is flagged for its process to stop."""
        now = utcnow()
        await self._update(
            update(Job)
            .where(Job.id == job_id, Job.state == "queued")
            .values(state="cancelled", error="cancelled before it started", finished_at=now)
        )
        await self._update(
            update(Job)
            .where(Job.id == job_id, Job.state == "running")
            .values(cancel_requested=True)
        )
        return await self.get(job_id)

    async def renew(self, worker: str) -> dict[str, bool]:
        """Renew the lease of every job ``worker`` holds; returns its running jobs, each with
        whether someone asked to cancel it."""
        held = (Job.worker == worker, Job.state.in_(ACTIVE))
        await self._update(update(Job).where(*held).values(heartbeat_at=utcnow()))
        async with self._sessions() as session:
            rows = await session.execute(
                select(Job.id, Job.cancel_requested).where(*held, Job.state == "running")
            )
            return {job_id: bool(flag) for job_id, flag in rows.all()}

    async def fail_held_by(self, worker: str, reason: str) -> int:
        """Fail every job ``worker`` still holds (it is shutting down)."""
        return await self._count(
            update(Job)
            .where(Job.worker == worker, Job.state.in_(ACTIVE))
            .values(state="failed", error=_clip(reason), finished_at=utcnow())
        )

    async def active(self) -> list[Job]:
        """Every queued or running record, for the sweeper's liveness checks."""
        async with self._sessions() as session:
            rows = await session.scalars(select(Job).where(Job.state.in_(ACTIVE)))
            return list(rows.all())

    async def fail_abandoned(self, job: Job, reason: str) -> bool:
        """Fail ``job`` if it is still active and its lease has not moved since it was read."""
        return await self._update(
            update(Job)
            .where(Job.id == job.id, Job.state.in_(ACTIVE), _lease_unchanged(job))
            .values(state="failed", error=_clip(reason), finished_at=utcnow())
        )

    async def delete_finished_before(self, cutoff: datetime) -> int:
        """Delete finished records older than ``cutoff``; returns how many."""
        async with self._sessions() as session, session.begin():
            result = await session.execute(
                delete(Job).where(Job.state.in_(FINISHED), Job.finished_at < cutoff)
            )
            return int(cast(CursorResult[Any], result).rowcount)

    async def _update(self, statement: Update) -> bool:
        return await self._count(statement) > 0

    async def _count(self, statement: Update) -> int:
        # Shielded: a job task cancelled as its process stops must not abandon a write half
        # done, which on SQLite keeps the file locked and fails the hand-back that follows.
        return await asyncio.shield(self._write(statement))

    async def _write(self, statement: Update) -> int:
        async with self._sessions() as session, session.begin():
            result = await session.execute(statement)
            return int(cast(CursorResult[Any], result).rowcount)


def _lease_unchanged(job: Job) -> Any:
    seen = job.heartbeat_at
    return Job.heartbeat_at.is_(None) if seen is None else Job.heartbeat_at <= seen


def _clip(error: str | None) -> str | None:
    if error is None or len(error) <= MAX_ERROR_CHARS:
        return error
    return error[: MAX_ERROR_CHARS - 3] + "..."
