"""The limiter bench (bench/bench_limiter.py) on the real Redis: it holds every lease it
counts, never more than the limit, and leaves no keys behind."""

from __future__ import annotations

import os

import redis.asyncio as aioredis

from bench.bench_limiter import one_run

REDIS_URL = os.environ.get("PLAUDIT_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")


async def test_one_run_times_every_call_and_cleans_up() -> None:
    result = await one_run(REDIS_URL, calls=40, clients=8, hold_s=0.01, rpm=None)
    # 40 holds of 10 ms, 8 at a time, take at least 50 ms: 1.25 ms per call.
    assert result["wall_ms_per_call"] >= 1.25
    assert result["cpu_ms_per_call"] > 0
    client: aioredis.Redis = aioredis.from_url(REDIS_URL)  # type: ignore[no-untyped-call]
    try:
        assert not [k async for k in client.scan_iter("plaudit:limits:bench-*")]
    finally:
        await client.aclose()
