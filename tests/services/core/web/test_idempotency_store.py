"""The idempotency store on SQLite and the real Postgres: release, takeover, expiry, atomicity."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from services.core.db import engine as db
from services.core.db.records import ScoredGroupRepository, content_hash
from services.core.db.tables import IdempotencyRecord, ScoredGroup
from services.core.errors import BackendUnavailable, Conflict, RequestInProgress
from services.core.reliability_settings import IdempotencySettings
from services.core.web.idempotency import IdempotencyStore, ReplayKey
from services.settings import Settings

KEY = ReplayKey("step-1", principal="abc")


class Clock:
    """A settable wall clock, so leases and expiry are tested without sleeping."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def sessions(settings: Settings) -> AsyncIterator[async_sessionmaker[AsyncSession]]:
    url = settings.resolved_database_url
    if settings.auto_migrate:
        await db.upgrade_async(url)
    engine = db.make_engine(url)
    yield db.make_sessionmaker(engine)
    await engine.dispose()


def _store(sessions: async_sessionmaker[AsyncSession], clock: Clock, **fields: Any) -> Any:
    config = IdempotencySettings(**{"lease_s": 30, "wait_s": 5, "ttl_s": 3600, **fields})
    return IdempotencyStore(sessions, config, clock=clock)


async def _count(sessions: async_sessionmaker[AsyncSession], table: Any) -> int:
    async with sessions() as session:
        return int(await session.scalar(select(func.count()).select_from(table)) or 0)


async def test_a_failed_computation_releases_the_claim(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    store = _store(sessions, Clock())

    async def fail() -> dict[str, Any]:
        raise BackendUnavailable("judge down", retry_after=1)

    with pytest.raises(BackendUnavailable):
        await store.run(KEY, "e", {"a": 1}, fail)
    assert await _count(sessions, IdempotencyRecord) == 0

    async def ok() -> dict[str, Any]:
        return {"answer": 2}

    assert await store.run(KEY, "e", {"a": 1}, ok) == {"answer": 2}


async def _dead_claim(sessions: async_sessionmaker[AsyncSession], clock: Clock) -> None:
    """A claim whose process died mid-computation: pending, renewed until a moment ago."""
    record = IdempotencyRecord(
        id=KEY.record_id("e"),
        principal=KEY.principal,
        endpoint="e",
        key=KEY.key,
        request_hash=content_hash({"endpoint": "e", "payload": {"a": 1}}),
        state="pending",
        token="dead-process",
        lease_until=clock.now + 30,
        expires_at=clock.now + 3600,
    )
    async with sessions() as session, session.begin():
        session.add(record)


async def test_a_live_claim_makes_a_duplicate_wait_then_409(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    clock = Clock()
    await _dead_claim(sessions, clock)
    waiter = _store(sessions, clock, wait_s=0.05)

    async def compute() -> dict[str, Any]:
        raise AssertionError("the lease is still alive: a duplicate must not compute")

    with pytest.raises(RequestInProgress) as caught:
        await waiter.run(KEY, "e", {"a": 1}, compute)
    assert caught.value.status_code == 409 and "Retry-After" in caught.value.headers


async def test_a_crashed_claim_is_taken_over_after_its_lease(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    clock = Clock()
    await _dead_claim(sessions, clock)
    clock.now += 31
    calls = []

    async def compute() -> dict[str, Any]:
        calls.append(1)
        return {"answer": 7}

    store = _store(sessions, clock)
    assert await store.run(KEY, "e", {"a": 1}, compute) == {"answer": 7}
    assert await store.run(KEY, "e", {"a": 1}, compute) == {"answer": 7}
    assert calls == [1]


async def test_answers_expire_and_are_purged(sessions: async_sessionmaker[AsyncSession]) -> None:
    clock = Clock()
    store = _store(sessions, clock, ttl_s=60)
    answers = iter([{"n": 1}, {"n": 2}])

    async def compute() -> dict[str, Any]:
        return next(answers)

    assert await store.run(KEY, "e", {"a": 1}, compute) == {"n": 1}
    assert await store.run(ReplayKey("other"), "e", {}, compute) == {"n": 2}
    clock.now += 30
    assert await store.purge_expired() == 0
    clock.now += 31
    assert await store.purge_expired() == 2
    # Past its ttl the key is free again, even for another body.
    answers = iter([{"n": 3}])
    assert await store.run(KEY, "e", {"a": 2}, compute) == {"n": 3}


async def test_an_expired_answer_is_not_replayed_before_the_purge(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    clock = Clock()
    store = _store(sessions, clock, ttl_s=60)
    answers = iter([{"n": 1}, {"n": 2}])

    async def compute() -> dict[str, Any]:
        return next(answers)

    await store.run(KEY, "e", {"a": 1}, compute)
    clock.now += 61
    assert await store.run(KEY, "e", {"a": 1}, compute) == {"n": 2}


async def test_a_lapsed_claim_leaves_nothing_half_written(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    """The groups are written with the answer: a request that cannot store its answer
    stores no group either."""
    clock = Clock()
    store = _store(sessions, clock)
    groups = ScoredGroupRepository(sessions)

    async def compute() -> dict[str, Any]:
        await groups.add_many("ordinal", "run-x", 1, [("g", "h", {"v": 1})])
        # Meanwhile our lease lapsed and a retry took the key over.
        async with sessions() as session, session.begin():
            record = await session.get(IdempotencyRecord, KEY.record_id("e"))
            assert record is not None
            record.token = "someone-else"
        return {"answer": 1}

    with pytest.raises(BackendUnavailable):
        await store.run(KEY, "e", {"a": 1}, compute)
    assert await _count(sessions, ScoredGroup) == 0


async def test_groups_without_a_key_are_written_at_once(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    store = _store(sessions, Clock())
    groups = ScoredGroupRepository(sessions)
    seen: list[int] = []

    async def compute() -> dict[str, Any]:
        await groups.add_many("ordinal", "run-y", 1, [("g", "h", {"v": 1})])
        seen.append(await _count(sessions, ScoredGroup))
        return {}

    await store.run(None, "e", {}, compute)
    assert seen == [1]


async def test_the_same_key_with_another_body_conflicts(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    store = _store(sessions, Clock())

    async def compute() -> dict[str, Any]:
        return {}

    await store.run(KEY, "e", {"a": 1}, compute)
    with pytest.raises(Conflict):
        await store.run(KEY, "e", {"a": 2}, compute)
