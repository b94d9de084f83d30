"""Repositories for scored groups and idempotent replays."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import desc, func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from plaudit_wire.schemas import ScoredGroupOut
from services.core.context import current_principal
from services.core.db.tables import ScoredGroup, utc_iso
from services.core.outages import reading, transaction


def content_hash(payload: Any) -> str:
    """A stable sha256 of a JSON-serializable payload (sorted keys)."""
    raw = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(raw.encode()).hexdigest()


@dataclass
class WriteBuffer:
    """Rows a request wants stored, held back until its Idempotency-Key answer is stored.

    Written in the same transaction as the answer, so a request either leaves its groups and
    its replayable answer, or nothing (issue 9: a failed store leaves nothing half-written).
    """

    rows: list[ScoredGroup] = field(default_factory=list)
    open: bool = True


_buffer: ContextVar[WriteBuffer | None] = ContextVar("plaudit_write_buffer", default=None)


@contextmanager
def buffered_writes() -> Iterator[WriteBuffer]:
    """Within this block, :meth:`ScoredGroupRepository.add_many` fills the returned buffer."""
    buffer = WriteBuffer()
    token = _buffer.set(buffer)
    try:
        yield buffer
    finally:
        # Closed, not only unset: a task spawned inside the block keeps a copy of the context.
        buffer.open = False
        _buffer.reset(token)


@dataclass(frozen=True)
class RunRow:
    """One run as the runs listing sums it up."""

    run_id: str
    groups: int
    first_step: int | None
    last_step: int | None
    first_at: datetime
    last_at: datetime
    services: list[str]


class ScoredGroupRepository:
    """Stores every scored group that carries a ``run_id``, and lists them per run.

    A row records the key that wrote it (``owner``); the caller of a listing sees only its own
    rows unless it is an admin (or the server runs without keys).
    """

    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self._sessions = sessions

    async def add_many(
        self,
        service: str,
        run_id: str,
        step: int | None,
        groups: Sequence[tuple[str | None, str, dict[str, Any]]],
        *,
        spec_name: str | None = None,
        spec_version: int | None = None,
        inputs: Sequence[dict[str, Any] | None] | None = None,
    ) -> list[str]:
        """Store ``(group_id, request_hash, result)`` rows (with what each scored, ``inputs``,
        when given); returns their new ids.

        Inside :func:`buffered_writes` the rows are held for the caller's transaction instead.
        """
        owner = current_principal().owner
        rows = [
            ScoredGroup(
                id=uuid.uuid4().hex,
                run_id=run_id,
                step=step,
                service=service,
                group_id=group_id,
                request_hash=request_hash,
                result=result,
                owner=owner,
                spec_name=spec_name,
                spec_version=spec_version,
                inputs=scored,
            )
            for (group_id, request_hash, result), scored in zip(
                groups, inputs if inputs is not None else [None] * len(groups), strict=True
            )
        ]
        buffer = _buffer.get()
        if buffer is not None and buffer.open:
            buffer.rows.extend(rows)
            return [row.id for row in rows]
        async with transaction(self._sessions) as session:
            session.add_all(rows)
        return [row.id for row in rows]

    async def list_for_run(
        self,
        run_id: str,
        *,
        step: int | None = None,
        service: str | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> tuple[list[ScoredGroup], int]:
        """One page of the run's groups in scoring order, and how many there are in all."""
        where = [ScoredGroup.run_id == run_id, *_visible()]
        if step is not None:
            where.append(ScoredGroup.step == step)
        if service is not None:
            where.append(ScoredGroup.service == service)
        query = select(ScoredGroup).where(*where).order_by(ScoredGroup.created_at, ScoredGroup.id)
        async with reading(self._sessions) as session:
            total = await session.scalar(
                select(func.count()).select_from(ScoredGroup).where(*where)
            )
            rows = list((await session.scalars(query.limit(limit).offset(offset))).all())
        return rows, int(total or 0)

    async def runs(self, *, limit: int = 100, offset: int = 0) -> tuple[list[RunRow], int]:
        """The runs the caller may see, most recently active first, and how many in all."""
        where = _visible()
        summary = (
            select(
                ScoredGroup.run_id,
                func.count().label("groups"),
                func.min(ScoredGroup.step),
                func.max(ScoredGroup.step),
                func.min(ScoredGroup.created_at),
                func.max(ScoredGroup.created_at).label("last_at"),
            )
            .where(*where)
            .group_by(ScoredGroup.run_id)
        )
        count = select(func.count(func.distinct(ScoredGroup.run_id))).where(*where)
        page = summary.order_by(desc("last_at"), ScoredGroup.run_id).limit(limit).offset(offset)
        async with reading(self._sessions) as session:
            total = int(await session.scalar(count) or 0)
            found = (await session.execute(page)).all()
            services = await self._services(session, [r[0] for r in found])
        rows = [
            RunRow(r[0], r[1], r[2], r[3], r[4], r[5], sorted(services.get(r[0], set())))
            for r in found
        ]
        return rows, total

    async def run_specs(self, run_id: str) -> list[dict[str, Any]]:
        """The reward specs a run was scored with: hash, and name@version when named."""
        query = select(ScoredGroup.result, ScoredGroup.spec_name, ScoredGroup.spec_version).where(
            ScoredGroup.run_id == run_id, ScoredGroup.service == "rewards", *_visible()
        )
        seen: dict[tuple[Any, ...], dict[str, Any]] = {}
        async with reading(self._sessions) as session:
            for result, name, version in (await session.execute(query)).all():
                spec_hash = result.get("spec_hash") if isinstance(result, dict) else None
                key = (spec_hash, name, version)
                seen.setdefault(key, {"hash": spec_hash, "name": name, "version": version})
        return list(seen.values())

    async def _services(self, session: AsyncSession, run_ids: list[str]) -> dict[str, set[str]]:
        if not run_ids:
            return {}
        query = (
            select(ScoredGroup.run_id, ScoredGroup.service)
            .where(ScoredGroup.run_id.in_(run_ids), *_visible())
            .distinct()
        )
        out: dict[str, set[str]] = {}
        for run_id, service in (await session.execute(query)).all():
            out.setdefault(run_id, set()).add(service)
        return out


def _visible() -> list[Any]:
    """The filter that keeps other tenants' rows out of a non-admin caller's listings."""
    principal = current_principal()
    if principal.admin or principal.owner is None:
        return []
    return [ScoredGroup.owner == principal.owner]


def group_out(row: ScoredGroup) -> ScoredGroupOut:
    """A stored group in its wire form (the runs listing and a run's export share it)."""
    return ScoredGroupOut(
        id=row.id,
        run_id=row.run_id,
        step=row.step,
        service=row.service,
        group_id=row.group_id,
        request_hash=row.request_hash,
        result=row.result,
        created_at=utc_iso(row.created_at),
        spec_name=row.spec_name,
        spec_version=row.spec_version,
        inputs=row.inputs,
    )
