"""Where synthesis keeps its candidates: the ``rubric_instances`` table.

A caller sees the instances of the jobs its key started (an admin, or an open server, sees
all), like rubrics and jobs themselves.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from plaudit_wire.synthesis import InstanceOut, InstanceStatus
from services.core.context import current_principal
from services.core.db.tables import RubricInstanceRecord, utc_iso, utcnow


@dataclass(frozen=True)
class NewInstance:
    job_id: str
    status: InstanceStatus
    document_id: str
    position: int
    candidate: dict[str, Any]
    stage: str | None = None
    reason: str | None = None
    domain: str | None = None
    persona: str | None = None
    question: str | None = None
    reference_answer: str | None = None
    rubric_id: str | None = None
    rubric_version: int | None = None


class SqlInstanceRepository:
    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self._sessions = sessions

    async def add_many(self, instances: list[NewInstance]) -> None:
        """Store every candidate of a job in one transaction; owner = the caller."""
        owner = current_principal().owner
        now = utcnow()
        rows = [
            RubricInstanceRecord(
                id=f"ri_{uuid.uuid4().hex[:20]}", owner=owner, created_at=now, **i.__dict__
            )
            for i in instances
        ]
        async with self._sessions() as session, session.begin():
            session.add_all(rows)

    async def page(
        self,
        *,
        job_id: str | None,
        status: InstanceStatus | None,
        stage: str | None,
        limit: int,
        offset: int,
    ) -> tuple[list[InstanceOut], int]:
        clauses = _visible()
        for column, value in (
            (RubricInstanceRecord.job_id, job_id),
            (RubricInstanceRecord.status, status),
            (RubricInstanceRecord.stage, stage),
        ):
            if value is not None:
                clauses.append(column == value)
        query = (
            select(RubricInstanceRecord)
            .where(*clauses)
            .order_by(
                RubricInstanceRecord.created_at.desc(),
                RubricInstanceRecord.job_id,
                RubricInstanceRecord.position,
            )
            .limit(limit)
            .offset(offset)
        )
        count = select(func.count()).select_from(RubricInstanceRecord).where(*clauses)
        async with self._sessions() as session:
            total = await session.scalar(count)
            rows = (await session.scalars(query)).all()
        return [_out(r) for r in rows], int(total or 0)

    async def kept(self, job_id: str) -> list[InstanceOut]:
        """Every kept instance of a job, in document order."""
        query = (
            select(RubricInstanceRecord)
            .where(
                *_visible(),
                RubricInstanceRecord.job_id == job_id,
                RubricInstanceRecord.status == "kept",
            )
            .order_by(RubricInstanceRecord.position)
        )
        async with self._sessions() as session:
            return [_out(r) for r in (await session.scalars(query)).all()]

    async def of_job(self, job_id: str) -> list[InstanceOut]:
        """Every instance of a job (kept and rejected), in document order."""
        query = (
            select(RubricInstanceRecord)
            .where(*_visible(), RubricInstanceRecord.job_id == job_id)
            .order_by(RubricInstanceRecord.position)
        )
        async with self._sessions() as session:
            return [_out(r) for r in (await session.scalars(query)).all()]

    async def positions(self, job_id: str) -> set[int]:
        """The document positions of a job that have an instance already."""
        query = select(RubricInstanceRecord.position).where(
            *_visible(), RubricInstanceRecord.job_id == job_id
        )
        async with self._sessions() as session:
            return set((await session.scalars(query)).all())

    async def job_known(self, job_id: str) -> bool:
        """Whether the caller can see any candidate of ``job_id``."""
        query = (
            select(func.count())
            .select_from(RubricInstanceRecord)
            .where(*_visible(), RubricInstanceRecord.job_id == job_id)
        )
        async with self._sessions() as session:
            return bool(await session.scalar(query))


def _visible() -> list[Any]:
    principal = current_principal()
    if principal.admin or principal.owner is None:
        return []
    return [RubricInstanceRecord.owner == principal.owner]


def _out(row: RubricInstanceRecord) -> InstanceOut:
    created = row.created_at
    return InstanceOut(
        id=row.id,
        job_id=row.job_id,
        status=row.status,
        document_id=row.document_id,
        stage=row.stage,
        reason=row.reason,
        domain=row.domain,
        persona=row.persona,
        question=row.question,
        reference_answer=row.reference_answer,
        rubric_id=row.rubric_id,
        rubric_version=row.rubric_version,
        candidate=dict(row.candidate),
        created_at=utc_iso(created),
    )
