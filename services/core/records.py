"""Repositories for scored groups and idempotent replays."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from services.core.errors import Conflict
from services.core.models import IdempotencyRecord, ScoredGroup


def content_hash(payload: Any) -> str:
    """A stable sha256 of a JSON-serializable payload (sorted keys)."""
    raw = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(raw.encode()).hexdigest()


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
        """Store ``(group_id, request_hash, result)`` rows; returns their new ids."""
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
        async with self._sessions() as session, session.begin():
            session.add_all(rows)
        return [row.id for row in rows]

    async def list_for_run(
        self, run_id: str, *, step: int | None = None, limit: int = 100, offset: int = 0
    ) -> list[ScoredGroup]:
        query = select(ScoredGroup).where(ScoredGroup.run_id == run_id)
        if step is not None:
            query = query.where(ScoredGroup.step == step)
        query = query.order_by(ScoredGroup.created_at, ScoredGroup.id).limit(limit).offset(offset)
        async with self._sessions() as session:
            return list((await session.scalars(query)).all())


class IdempotencyStore:
    """Replays the stored answer when a request is retried with the same Idempotency-Key."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self._sessions = sessions

    async def get(self, key: str) -> IdempotencyRecord | None:
        async with self._sessions() as session:
            return await session.get(IdempotencyRecord, key)

    async def put(
        self, key: str, endpoint: str, request_hash: str, response: dict[str, Any]
    ) -> IdempotencyRecord:
        """Insert the record; when a concurrent retry won the race, return its record."""
        record = IdempotencyRecord(
            key=key, endpoint=endpoint, request_hash=request_hash, response=response
        )
        try:
            async with self._sessions() as session, session.begin():
                session.add(record)
            return record
        except IntegrityError:
            existing = await self.get(key)
            if existing is None:  # pragma: no cover - vanished between insert and read
                raise
            return existing

    async def run(
        self,
        key: str | None,
        endpoint: str,
        payload: Any,
        compute: Callable[[], Awaitable[dict[str, Any]]],
    ) -> dict[str, Any]:
        """Compute once per key; a retry with the same body gets the same answer."""
        if key is None:
            return await compute()
        request_hash = content_hash({"endpoint": endpoint, "payload": payload})
        existing = await self.get(key)
        if existing is None:
            response = await compute()
            existing = await self.put(key, endpoint, request_hash, response)
        if existing.request_hash != request_hash:
            raise Conflict(
                "this Idempotency-Key was already used with a different request body",
                param="Idempotency-Key",
            )
        return existing.response
