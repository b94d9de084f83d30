"""The judge cache asks its store once per call, not once per prompt (issue 19): a G=8
round-robin tournament is 56 prompts, and with Redis each GET and SET was a round trip of its
own (112 per group on the rewards route, which always caches)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence

import pytest

from judges.backends.base import ChoiceRequest
from services.core.cache import RedisCache
from services.core.models.cached_judge import CachedJudge
from tests.conftest import REDIS_URL, require_services
from tests.services.judge.scripted import ScriptedBackend


class CountingRedisCache(RedisCache):
    """The real Redis cache, counting how the judge calls it."""

    def __init__(self) -> None:
        super().__init__(REDIS_URL, prefix="plaudit:test-round-trips:")
        self.calls: list[str] = []

    async def get(self, key: str) -> bytes | None:
        self.calls.append("get")
        return await super().get(key)

    async def set(self, key: str, value: bytes, ttl: float | None = None) -> None:
        self.calls.append("set")
        await super().set(key, value, ttl)

    async def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        self.calls.append("get_many")
        return await super().get_many(keys)

    async def set_many(self, items: Mapping[str, bytes], ttl: float | None = None) -> None:
        self.calls.append("set_many")
        await super().set_many(items, ttl)


@pytest.fixture
async def cache() -> AsyncIterator[CountingRedisCache]:
    require_services()
    store = CountingRedisCache()
    yield store
    await store._redis.flushdb()
    await store.close()


async def test_a_tournament_is_one_lookup_and_one_store(cache: CountingRedisCache) -> None:
    judge = CachedJudge(ScriptedBackend(), cache, ttl=60)
    requests = [
        ChoiceRequest([{"role": "user", "content": f"pair {i}: GOOD or not"}], ("A", "B"))
        for i in range(56)
    ]
    first = await judge.score_choices(requests)
    assert cache.calls == ["get_many", "set_many"]
    assert all(r.ok for r in first)
    cache.calls.clear()
    again = await judge.score_choices(requests)
    assert cache.calls == ["get_many"] and again == first
    ttl = await cache._redis.pttl("plaudit:test-round-trips:" + judge.key("choices", requests[0]))
    assert 0 < ttl <= 60_000
