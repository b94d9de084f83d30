"""The cache and job queue, in-process and on the real Redis, behind one interface."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aioredis

from services.core.cache import Cache, MemoryCache, RedisCache
from services.core.jobs import ArqJobQueue, InProcessJobQueue, JobRegistry, make_worker
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


async def test_memory_cache_evicts_least_recently_used() -> None:
    cache = MemoryCache(max_entries=2)
    await cache.set("a", b"1")
    await cache.set("b", b"2")
    await cache.get("a")
    await cache.set("c", b"3")
    assert await cache.get("b") is None
    assert await cache.get("a") == b"1"


async def _square(ctx: dict[str, Any], x: int) -> int:
    await asyncio.sleep(0.01)
    return x * x


async def _fail(ctx: dict[str, Any]) -> None:
    raise ValueError("bad job")


def _registry() -> JobRegistry:
    registry = JobRegistry()
    registry.register("square", _square)
    registry.register("fail", _fail)
    return registry


async def test_in_process_jobs_run_and_report() -> None:
    queue = InProcessJobQueue(_registry())
    ok = await queue.enqueue("square", x=7)
    bad = await queue.enqueue("fail")
    assert (await queue.wait(ok, 5)).result == 49
    failed = await queue.wait(bad, 5)
    assert failed.state == "failed" and "bad job" in (failed.error or "")
    assert (await queue.info("nope")).state == "not_found"
    with pytest.raises(KeyError):
        await queue.enqueue("missing")
    await queue.close()


async def test_arq_jobs_run_in_a_real_worker() -> None:
    require_services()
    client = aioredis.from_url(REDIS_URL)
    await client.flushdb()
    await client.aclose()
    registry = _registry()
    queue = await ArqJobQueue.connect(REDIS_URL)
    try:
        ok = await queue.enqueue("square", x=9)
        bad = await queue.enqueue("fail")
        assert (await queue.info(ok)).state == "queued"
        worker = make_worker(registry, REDIS_URL, burst=True)
        await worker.async_run()
        await worker.close()
        done = await queue.wait(ok, 10)
        assert done.state == "complete" and done.result == 81
        failed = await queue.wait(bad, 10)
        assert failed.state == "failed" and "bad job" in (failed.error or "")
    finally:
        await queue.close()
