"""Idempotency-Key replays that hold under concurrency (issue 9).

A request sent with a key first *claims* it with a unique insert of a pending record. The one
request whose insert succeeds computes; duplicates that arrive meanwhile poll the record (with
backoff, for at most ``wait_s``) until it holds the answer, and replay it. A computation that
fails deletes its claim, so a retry computes afresh. A live claim is renewed every
``lease_s / 3``; one whose process died is no longer renewed and is taken over after
``lease_s``. The answer and the request's scored groups are written in one transaction, so a
request leaves both or neither.

Keys are scoped: the record id hashes the API key's principal, the route and the key, so two
API keys (or two routes) never share an answer. Answers are replayed for ``ttl_s``, then
deleted by :meth:`IdempotencyStore.purge_expired`.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import random
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import CursorResult, delete, or_, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from services.core.db.records import buffered_writes, content_hash
from services.core.db.tables import IdempotencyRecord, ScoredGroup
from services.core.errors import BackendUnavailable, Conflict, RequestInProgress
from services.core.metrics import Metrics
from services.core.outages import reading, transaction
from services.core.reliability_settings import IdempotencySettings

log = logging.getLogger(__name__)

PENDING = "pending"
DONE = "done"
_FIRST_POLL_S = 0.01
_MAX_POLL_S = 0.5


@dataclass(frozen=True)
class ReplayKey:
    """An ``Idempotency-Key`` as the client sent it, and the principal that sent it.

    ``principal`` is a short, non-secret hash of the API key (None when auth is off).
    """

    key: str
    principal: str | None = None

    def record_id(self, endpoint: str) -> str:
        """The stored record's id: one per (principal, route, key)."""
        raw = "\x00".join((self.principal or "", endpoint, self.key))
        return hashlib.sha256(raw.encode()).hexdigest()


@dataclass(frozen=True)
class _Claim:
    id: str
    key: ReplayKey
    endpoint: str
    request_hash: str
    token: str


class IdempotencyStore:
    """Compute once per key; concurrent and later retries with the same body replay the answer.

    Example::

        store = IdempotencyStore(sessions, IdempotencySettings())
        answer = await store.run(ReplayKey("step-3-g7"), "ordinal.advantages", body, compute)
    """

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        settings: IdempotencySettings | None = None,
        *,
        metrics: Metrics | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._sessions = sessions
        self._settings = settings or IdempotencySettings()
        self._metrics = metrics
        self._clock = clock

    async def run(
        self,
        key: ReplayKey | None,
        endpoint: str,
        payload: Any,
        compute: Callable[[], Awaitable[dict[str, Any]]],
    ) -> dict[str, Any]:
        """The stored answer for ``key`` on ``endpoint``, computing it when nobody has."""
        if key is None:
            return await compute()
        claim = _Claim(
            id=key.record_id(endpoint),
            key=key,
            endpoint=endpoint,
            request_hash=content_hash({"endpoint": endpoint, "payload": payload}),
            token=uuid.uuid4().hex,
        )
        replay = await self._acquire(claim)
        if replay is not None:
            self._count("replayed")
            return replay
        self._count("computed")
        return await self._compute_claimed(claim, compute)

    async def purge_expired(self) -> int:
        """Delete answers past their ``ttl_s`` and abandoned claims; returns how many."""
        now = self._clock()
        query = delete(IdempotencyRecord).where(
            IdempotencyRecord.expires_at < now,
            or_(IdempotencyRecord.state == DONE, IdempotencyRecord.lease_until < now),
        )
        async with transaction(self._sessions) as session:
            result = cast(CursorResult[Any], await session.execute(query))
        return int(result.rowcount or 0)

    async def purge_forever(self) -> None:
        """Run :meth:`purge_expired` every ``cleanup_interval_s`` (a lifespan task)."""
        while True:
            await asyncio.sleep(self._settings.cleanup_interval_s)
            try:
                purged = await self.purge_expired()
            except Exception as exc:  # an outage must not end the loop
                log.warning("idempotency cleanup failed: %s", type(exc).__name__)
            else:
                log.debug("idempotency cleanup deleted %d records", purged)

    async def _acquire(self, claim: _Claim) -> dict[str, Any] | None:
        """None once ``claim`` is ours; the stored answer when another request computed it."""
        give_up = time.monotonic() + self._settings.wait_s
        delay = _FIRST_POLL_S
        while True:
            record = await self._insert_or_get(claim)
            if record is None:
                return None
            now = self._clock()
            if _expired(record, now):
                await self._delete_expired(claim.id, now)
                continue
            if record.request_hash != claim.request_hash:
                self._count("conflict")
                raise Conflict(
                    "this Idempotency-Key was already used with a different request body",
                    param="Idempotency-Key",
                )
            if record.state == DONE:
                return record.response
            if record.lease_until <= now and await self._take_over(claim, record.token):
                self._count("taken_over")
                return None
            if time.monotonic() >= give_up:
                self._count("in_progress")
                raise RequestInProgress(
                    "a request with this Idempotency-Key is still being computed",
                    param="Idempotency-Key",
                    retry_after=self._settings.lease_s,
                )
            await asyncio.sleep(random.uniform(delay / 2, delay))
            delay = min(delay * 2, _MAX_POLL_S)

    async def _insert_or_get(self, claim: _Claim) -> IdempotencyRecord | None:
        """Insert a pending record (None: claimed), or read the one already there."""
        while True:
            now = self._clock()
            record = IdempotencyRecord(
                id=claim.id,
                principal=claim.key.principal,
                endpoint=claim.endpoint,
                key=claim.key.key,
                request_hash=claim.request_hash,
                state=PENDING,
                token=claim.token,
                response=None,
                lease_until=now + self._settings.lease_s,
                expires_at=now + self._settings.ttl_s,
            )
            try:
                async with transaction(self._sessions) as session:
                    session.add(record)
                return None
            except IntegrityError:
                pass
            async with reading(self._sessions) as session:
                existing = await session.get(IdempotencyRecord, claim.id)
            if existing is not None:
                return existing
            # Deleted between our insert and our read (released or purged): try again.

    async def _take_over(self, claim: _Claim, stale_token: str) -> bool:
        """Claim a pending record whose holder stopped renewing it (its process died)."""
        now = self._clock()
        query = (
            update(IdempotencyRecord)
            .where(
                IdempotencyRecord.id == claim.id,
                IdempotencyRecord.token == stale_token,
                IdempotencyRecord.state == PENDING,
                IdempotencyRecord.lease_until <= now,
            )
            .values(token=claim.token, lease_until=now + self._settings.lease_s)
        )
        async with transaction(self._sessions) as session:
            result = cast(CursorResult[Any], await session.execute(query))
        return result.rowcount == 1

    async def _delete_expired(self, record_id: str, now: float) -> None:
        query = delete(IdempotencyRecord).where(
            IdempotencyRecord.id == record_id, IdempotencyRecord.expires_at <= now
        )
        async with transaction(self._sessions) as session:
            await session.execute(query)

    async def _compute_claimed(
        self, claim: _Claim, compute: Callable[[], Awaitable[dict[str, Any]]]
    ) -> dict[str, Any]:
        renewal = asyncio.create_task(self._renew(claim))
        try:
            with buffered_writes() as buffer:
                response = await compute()
            await self._complete(claim, response, buffer.rows)
        except BaseException:
            renewal.cancel()
            await self._release(claim)
            raise
        renewal.cancel()
        return response

    async def _complete(
        self, claim: _Claim, response: dict[str, Any], rows: list[ScoredGroup]
    ) -> None:
        """Store the answer and the request's scored groups in one transaction."""
        query = (
            update(IdempotencyRecord)
            .where(
                IdempotencyRecord.id == claim.id,
                IdempotencyRecord.token == claim.token,
                IdempotencyRecord.state == PENDING,
            )
            .values(state=DONE, response=response, expires_at=self._clock() + self._settings.ttl_s)
        )
        async with transaction(self._sessions) as session:
            result = cast(CursorResult[Any], await session.execute(query))
            if result.rowcount != 1:
                # Our lease lapsed and another request took the key over: its answer wins.
                raise BackendUnavailable(
                    "this request's Idempotency-Key claim lapsed while it was computed; "
                    "retry to get the stored answer",
                    retry_after=1,
                )
            session.add_all(rows)

    async def _renew(self, claim: _Claim) -> None:
        """Keep the lease alive while the computation runs."""
        interval = self._settings.lease_s / 3
        while True:
            await asyncio.sleep(interval)
            query = (
                update(IdempotencyRecord)
                .where(
                    IdempotencyRecord.id == claim.id,
                    IdempotencyRecord.token == claim.token,
                    IdempotencyRecord.state == PENDING,
                )
                .values(lease_until=self._clock() + self._settings.lease_s)
            )
            try:
                async with transaction(self._sessions) as session:
                    await session.execute(query)
            except Exception as exc:  # the next renewal may succeed; the lease is the backstop
                log.warning("could not renew an idempotency claim: %s", type(exc).__name__)

    async def _release(self, claim: _Claim) -> None:
        """Delete our pending claim so a retry can compute (best effort: the lease backs it)."""
        query = delete(IdempotencyRecord).where(
            IdempotencyRecord.id == claim.id,
            IdempotencyRecord.token == claim.token,
            IdempotencyRecord.state == PENDING,
        )
        try:
            async with transaction(self._sessions) as session:
                await session.execute(query)
        except Exception as exc:
            log.warning("could not release an idempotency claim: %s", type(exc).__name__)

    def _count(self, outcome: str) -> None:
        if self._metrics is not None:
            self._metrics.idempotency.labels(outcome).inc()


def _expired(record: IdempotencyRecord, now: float) -> bool:
    """Past its ttl, and not a claim that a live request still renews."""
    return record.expires_at <= now and (record.state == DONE or record.lease_until <= now)
