"""The repository of scored groups, and the write buffer that makes a replayable request atomic."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from services.core.models import ScoredGroup
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


class ScoredGroupRepository:
    """Stores every scored group that carries a ``run_id``, and lists them per run."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self._sessions = sessions

    async def add_many(
        self,
        service: str,
        run_id: str,
        step: int | None,
        groups: Sequence[tuple[str | None, str, dict[str, Any]]],
    ) -> list[str]:
        """Store ``(group_id, request_hash, result)`` rows; returns their new ids.

        Inside :func:`buffered_writes` the rows are held for the caller's transaction instead.
        """
        rows = [
            ScoredGroup(
                id=uuid.uuid4().hex,
                run_id=run_id,
                step=step,
                service=service,
                group_id=group_id,
                request_hash=request_hash,
                result=result,
            )
            for group_id, request_hash, result in groups
        ]
        buffer = _buffer.get()
        if buffer is not None and buffer.open:
            buffer.rows.extend(rows)
            return [row.id for row in rows]
        async with transaction(self._sessions) as session:
            session.add_all(rows)
        return [row.id for row in rows]

    async def list_for_run(
        self, run_id: str, *, step: int | None = None, limit: int = 100, offset: int = 0
    ) -> list[ScoredGroup]:
        query = select(ScoredGroup).where(ScoredGroup.run_id == run_id)
        if step is not None:
            query = query.where(ScoredGroup.step == step)
        query = query.order_by(ScoredGroup.created_at, ScoredGroup.id).limit(limit).offset(offset)
        async with reading(self._sessions) as session:
            return list((await session.scalars(query)).all())
