"""Where the memory is kept: runs, ingested rollouts, records and revisions (SQL).

Rows are returned as the ORM objects themselves (sessions do not expire them on commit).
Tenancy: a run belongs to the key that first scored it; the admin API sees every run.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from services.core.db.tables import utcnow
from services.core.outages import reading, transaction
from services.memory.models import MemoryRecordRow, MemoryRevision, MemoryRollout, MemoryRun

ACTIVE = ("queued", "running")


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:20]}"


@dataclass(frozen=True)
class RecordFilter:
    run_id: str | None = None
    rubric_id: str | None = None
    kind: str | None = None
    step: int | None = None


class MemoryRepository:
    """Every read and write of the memory's four tables."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self._sessions = sessions

    # --- runs -----------------------------------------------------------------------------

    async def ensure_run(
        self, run_id: str, rubric_id: str, owner: str | None, revise_every: int
    ) -> MemoryRun:
        found = await self.run(run_id, rubric_id)
        if found is not None:
            return found
        now = utcnow()
        row = MemoryRun(
            run_id=run_id,
            rubric_id=rubric_id,
            owner=owner,
            paused=False,
            revise_every=revise_every,
            flags=[],
            steps=0,
            created_at=now,
            updated_at=now,
        )
        try:
            async with transaction(self._sessions) as session:
                session.add(row)
        except IntegrityError:  # another ingest made it first
            again = await self.run(run_id, rubric_id)
            assert again is not None
            return again
        return row

    async def run(self, run_id: str, rubric_id: str) -> MemoryRun | None:
        async with reading(self._sessions) as session:
            return await session.get(MemoryRun, (run_id, rubric_id))

    async def runs_of(self, run_id: str) -> list[MemoryRun]:
        """Every rubric's memory of ``run_id``, the most recently updated first."""
        query = (
            select(MemoryRun)
            .where(MemoryRun.run_id == run_id)
            .order_by(MemoryRun.updated_at.desc(), MemoryRun.rubric_id)
        )
        async with reading(self._sessions) as session:
            return list((await session.scalars(query)).all())

    async def runs(self, *, limit: int, offset: int) -> tuple[list[MemoryRun], int]:
        query = (
            select(MemoryRun)
            .order_by(MemoryRun.updated_at.desc(), MemoryRun.run_id, MemoryRun.rubric_id)
            .limit(limit)
            .offset(offset)
        )
        async with reading(self._sessions) as session:
            total = await session.scalar(select(func.count()).select_from(MemoryRun))
            return list((await session.scalars(query)).all()), int(total or 0)

    async def update_run(self, run_id: str, rubric_id: str | None, **values: Any) -> int:
        """Set ``values`` on the run's memory of ``rubric_id`` (None: of every rubric)."""
        clauses = [MemoryRun.run_id == run_id]
        if rubric_id is not None:
            clauses.append(MemoryRun.rubric_id == rubric_id)
        async with transaction(self._sessions) as session:
            result = await session.execute(
                update(MemoryRun).where(*clauses).values(updated_at=utcnow(), **values)
            )
        return int(getattr(result, "rowcount", 0) or 0)

    async def saw_step(self, run_id: str, rubric_id: str, step: int) -> None:
        async with transaction(self._sessions) as session:
            row = await session.get(MemoryRun, (run_id, rubric_id), with_for_update=True)
            if row is not None and (row.last_step is None or step > row.last_step):
                row.last_step = step
            if row is not None:
                row.updated_at = utcnow()

    async def claim_summary(self, run_id: str, rubric_id: str, step: int) -> bool:
        """Move ``summarized_step`` up to ``step``; False when it is there already (someone
        else summarised it), so each step is summarised once."""
        async with transaction(self._sessions) as session:
            result = await session.execute(
                update(MemoryRun)
                .where(
                    MemoryRun.run_id == run_id,
                    MemoryRun.rubric_id == rubric_id,
                    (MemoryRun.summarized_step.is_(None)) | (MemoryRun.summarized_step < step),
                )
                .values(summarized_step=step, steps=MemoryRun.steps + 1, updated_at=utcnow())
            )
        return bool(getattr(result, "rowcount", 0))

    async def add_flag(self, run_id: str, rubric_id: str, flag: dict[str, Any]) -> None:
        async with transaction(self._sessions) as session:
            row = await session.get(MemoryRun, (run_id, rubric_id), with_for_update=True)
            if row is not None:
                row.flags = [*row.flags, flag]
                row.updated_at = utcnow()

    # --- rollouts -------------------------------------------------------------------------

    async def add_rollouts(self, rows: Sequence[MemoryRollout]) -> None:
        async with transaction(self._sessions) as session:
            session.add_all(rows)

    async def rollouts(self, run_id: str, rubric_id: str, step: int) -> list[MemoryRollout]:
        query = (
            select(MemoryRollout)
            .where(
                MemoryRollout.run_id == run_id,
                MemoryRollout.rubric_id == rubric_id,
                MemoryRollout.step == step,
            )
            .order_by(MemoryRollout.id)
        )
        async with reading(self._sessions) as session:
            return list((await session.scalars(query)).all())

    async def first_rollouts(self, run_id: str, rubric_id: str, limit: int) -> list[MemoryRollout]:
        """The run's earliest stored groups (the frozen set starts with them)."""
        query = (
            select(MemoryRollout)
            .where(MemoryRollout.run_id == run_id, MemoryRollout.rubric_id == rubric_id)
            .order_by(MemoryRollout.id)
            .limit(limit)
        )
        async with reading(self._sessions) as session:
            return list((await session.scalars(query)).all())

    async def open_steps(self, run_id: str, rubric_id: str, after: int | None) -> list[int]:
        """Steps with stored groups after ``after`` (not yet summarised), in order."""
        query = (
            select(MemoryRollout.step)
            .distinct()
            .where(MemoryRollout.run_id == run_id, MemoryRollout.rubric_id == rubric_id)
        )
        if after is not None:
            query = query.where(MemoryRollout.step > after)
        async with reading(self._sessions) as session:
            return sorted(int(s) for s in (await session.scalars(query)).all())

    # --- records --------------------------------------------------------------------------

    async def add_records(self, rows: Sequence[MemoryRecordRow]) -> None:
        async with transaction(self._sessions) as session:
            session.add_all(rows)

    async def record(self, record_id: str) -> MemoryRecordRow | None:
        async with reading(self._sessions) as session:
            return await session.get(MemoryRecordRow, record_id)

    async def records(
        self, where: RecordFilter, *, limit: int, offset: int, newest_first: bool = True
    ) -> tuple[list[MemoryRecordRow], int]:
        clauses = _record_clauses(where)
        order = (
            (MemoryRecordRow.step.desc(), MemoryRecordRow.created_at.desc())
            if newest_first
            else (MemoryRecordRow.step, MemoryRecordRow.created_at)
        )
        query = (
            select(MemoryRecordRow)
            .where(*clauses)
            .order_by(*order, MemoryRecordRow.id)
            .limit(limit)
            .offset(offset)
        )
        count = select(func.count()).select_from(MemoryRecordRow).where(*clauses)
        async with reading(self._sessions) as session:
            total = await session.scalar(count)
            return list((await session.scalars(query)).all()), int(total or 0)

    # --- revisions ------------------------------------------------------------------------

    async def add_revision(self, row: MemoryRevision) -> None:
        async with transaction(self._sessions) as session:
            session.add(row)

    async def revision(self, revision_id: str) -> MemoryRevision | None:
        async with reading(self._sessions) as session:
            return await session.get(MemoryRevision, revision_id)

    async def set_revision(self, revision_id: str, **values: Any) -> None:
        async with transaction(self._sessions) as session:
            await session.execute(
                update(MemoryRevision)
                .where(MemoryRevision.id == revision_id)
                .values(updated_at=utcnow(), **values)
            )

    async def swap_revision(
        self,
        revision_id: str,
        expected: str,
        *,
        stale_before: datetime | None = None,
        **values: Any,
    ) -> bool:
        """Set ``values`` only while the row is still in state ``expected`` (and, with
        ``stale_before``, was last updated before it): a compare-and-set, so of two admins
        acting on one revision at once exactly one wins. True when this caller won."""
        clauses = [MemoryRevision.id == revision_id, MemoryRevision.state == expected]
        if stale_before is not None:
            clauses.append(MemoryRevision.updated_at < stale_before)
        async with transaction(self._sessions) as session:
            result = await session.execute(
                update(MemoryRevision).where(*clauses).values(updated_at=utcnow(), **values)
            )
        return getattr(result, "rowcount", 0) == 1

    async def active_revision(self, run_id: str, rubric_id: str) -> MemoryRevision | None:
        query = select(MemoryRevision).where(
            MemoryRevision.run_id == run_id,
            MemoryRevision.rubric_id == rubric_id,
            MemoryRevision.state.in_(ACTIVE),
        )
        async with reading(self._sessions) as session:
            return (await session.scalars(query.limit(1))).first()

    async def applied_revision(self, rubric_id: str, version: int) -> MemoryRevision | None:
        """The revision that made ``version`` of ``rubric_id``, if the memory made it."""
        query = select(MemoryRevision).where(
            MemoryRevision.rubric_id == rubric_id,
            MemoryRevision.to_version == version,
            MemoryRevision.state == "applied",
        )
        async with reading(self._sessions) as session:
            return (await session.scalars(query.limit(1))).first()

    async def revisions(
        self,
        run_id: str,
        *,
        rubric_id: str | None = None,
        states: Sequence[str] | None = None,
        limit: int,
        offset: int,
    ) -> tuple[list[MemoryRevision], int]:
        clauses = [MemoryRevision.run_id == run_id]
        if rubric_id is not None:
            clauses.append(MemoryRevision.rubric_id == rubric_id)
        if states is not None:
            clauses.append(MemoryRevision.state.in_(list(states)))
        query = (
            select(MemoryRevision)
            .where(*clauses)
            .order_by(MemoryRevision.created_at.desc(), MemoryRevision.id)
            .limit(limit)
            .offset(offset)
        )
        count = select(func.count()).select_from(MemoryRevision).where(*clauses)
        async with reading(self._sessions) as session:
            total = await session.scalar(count)
            return list((await session.scalars(query)).all()), int(total or 0)


def _record_clauses(where: RecordFilter) -> list[Any]:
    clauses: list[Any] = []
    for column, value in (
        (MemoryRecordRow.run_id, where.run_id),
        (MemoryRecordRow.rubric_id, where.rubric_id),
        (MemoryRecordRow.kind, where.kind),
        (MemoryRecordRow.step, where.step),
    ):
        if value is not None:
            clauses.append(column == value)
    return clauses
