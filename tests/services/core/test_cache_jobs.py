"""The cache, in-process and on the real Redis, behind one interface (jobs:
tests/services/core/jobs)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from services.core.cache import Cache, MemoryCache, RedisCache
from tests.conftest import REDIS_URL, require_services


@pytest.fixture(params=["memory", "redis"])
async def cache(request: pytest.FixtureRequest) -> AsyncIterator[Cache]:
    if request.param == "memory":
        c: Cache = MemoryCache(max_entries=3)
    else:
        require_services()
        c = RedisCache(REDIS_URL, prefix="plaudit:test:")
    yield c
    for key in ("a", "b", "c", "d", "ttl"):
        await c.delete(key)
    await c.close()


async def test_cache_round_trip_and_expiry(cache: Cache) -> None:
    assert await cache.get("a") is None
    await cache.set("a", b"1")
    assert await cache.get("a") == b"1"
    await cache.set("ttl", b"x", ttl=0.05)
    assert await cache.get("ttl") == b"x"
    await asyncio.sleep(0.15)
    assert await cache.get("ttl") is None
    await cache.delete("a")
    assert await cache.get("a") is None
    assert await cache.ping()


async def test_many_keys_in_one_call_round_trip_with_expiry(cache: Cache) -> None:
    assert await cache.get_many([]) == []
    await cache.set_many({"a": b"1", "b": b"2"})
    await cache.set_many({"ttl": b"x"}, ttl=0.05)
    assert await cache.get_many(["b", "nope", "a", "ttl"]) == [b"2", None, b"1", b"x"]
    await asyncio.sleep(0.15)
    assert await cache.get_many(["ttl", "a"]) == [None, b"1"]


async def test_memory_cache_evicts_least_recently_used() -> None:
    cache = MemoryCache(max_entries=2)
    await cache.set("a", b"1")
    await cache.set("b", b"2")
    await cache.get("a")
    await cache.set("c", b"3")
    assert await cache.get("b") is None
    assert await cache.get("a") == b"1"
