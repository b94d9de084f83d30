"""Concurrency and rate limits: in-process on a fake clock, and shared through the real Redis.

Redis comes from PLAUDIT_TEST_REDIS_URL (default: the local server, database 15). When it is
unreachable the Redis tests skip, except under CI=true, where they fail. Each test uses its own
limiter name, so nothing is flushed.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from judges.limits import (
    InProcessLimiter,
    Limiter,
    LimiterUnavailable,
    RedisLimiter,
    make_limiter,
)
from tests.serving import silent_port

REDIS_URL = os.environ.get("PLAUDIT_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
REPO_ROOT = Path(__file__).resolve().parents[2]


class FakeClock:
    """A monotonic clock that only moves when someone sleeps on it."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        await asyncio.sleep(0)


async def run_holders(limiters: list[Limiter], tasks_each: int, hold_s: float) -> int:
    """Hold a slot from each limiter ``tasks_each`` times at once; return the peak overlap."""
    active = peak = 0

    async def hold(limiter: Limiter) -> None:
        nonlocal active, peak
        async with limiter.acquire():
            active += 1
            peak = max(peak, active)
            await asyncio.sleep(hold_s)
            active -= 1

    await asyncio.gather(*(hold(lim) for lim in limiters for _ in range(tasks_each)))
    return peak


# -- in-process ----------------------------------------------------------------------


async def test_in_process_concurrency_never_exceeds_the_limit() -> None:
    limiter = InProcessLimiter(max_concurrency=3)
    assert await run_holders([limiter], tasks_each=20, hold_s=0.005) == 3


async def test_in_process_rate_is_a_sliding_window() -> None:
    clock = FakeClock()
    limiter = InProcessLimiter(rpm=3, window_s=1.0, clock=clock, sleep=clock.sleep)
    starts: list[float] = []

    async def start() -> None:
        async with limiter.acquire():
            starts.append(clock())

    await asyncio.gather(*(start() for _ in range(8)))
    assert len(starts) == 8
    starts.sort()
    assert starts[:3] == [0.0, 0.0, 0.0]
    for earlier, later in zip(starts, starts[3:], strict=False):
        assert later - earlier >= 1.0
    assert clock.sleeps  # the fourth start had to wait


async def test_in_process_limits_combine_and_release_on_error() -> None:
    limiter = InProcessLimiter(max_concurrency=1, rpm=100)
    with pytest.raises(RuntimeError):
        async with limiter.acquire():
            raise RuntimeError("boom")
    async with asyncio.timeout(5):
        async with limiter.acquire():
            pass


async def test_unlimited_limiter_does_not_wait() -> None:
    limiter = InProcessLimiter()
    assert await run_holders([limiter], tasks_each=50, hold_s=0.01) == 50


@pytest.mark.parametrize(
    "kwargs",
    [{"max_concurrency": 0}, {"rpm": 0}, {"rpm": 5, "window_s": 0.0}],
)
def test_bad_limits_are_rejected(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        InProcessLimiter(**kwargs)  # type: ignore[arg-type]


async def test_make_limiter_picks_the_implementation() -> None:
    assert isinstance(make_limiter(None, name="x", max_concurrency=2), InProcessLimiter)
    shared = make_limiter(REDIS_URL, name="x", max_concurrency=2)
    assert isinstance(shared, RedisLimiter)
    await shared.aclose()


# -- Redis ---------------------------------------------------------------------------


@pytest.fixture
async def redis_client() -> AsyncIterator[aioredis.Redis]:
    client: aioredis.Redis = aioredis.from_url(REDIS_URL)  # type: ignore[no-untyped-call]
    try:
        await client.ping()
    except Exception as exc:
        await client.aclose()
        if IN_CI:
            pytest.fail(f"CI=true but Redis at {REDIS_URL} is unreachable: {exc}")
        pytest.skip(f"Redis at {REDIS_URL} unreachable: {exc}")
    yield client
    await client.aclose()


@pytest.fixture
async def name(redis_client: aioredis.Redis) -> AsyncIterator[str]:
    """A fresh limiter name; its keys are deleted afterwards."""
    value = f"test-{uuid.uuid4().hex}"
    yield value
    await redis_client.delete(f"plaudit:limits:{value}:leases", f"plaudit:limits:{value}:rate")


async def two_limiters(name: str, **kwargs: float) -> list[RedisLimiter]:
    """Two limiters with their own connections, as two processes would have."""
    return [RedisLimiter(REDIS_URL, name, **kwargs) for _ in range(2)]  # type: ignore[arg-type]


async def test_two_redis_limiters_share_one_concurrency_limit(name: str) -> None:
    limiters = await two_limiters(name, max_concurrency=3, poll_interval_s=0.01)
    try:
        peak = await run_holders(list(limiters), tasks_each=8, hold_s=0.05)
        assert peak == 3
        assert await limiters[0].in_use() == 0
    finally:
        for limiter in limiters:
            await limiter.aclose()


async def test_cancelled_waiter_and_failing_body_leave_no_lease(name: str) -> None:
    limiter = RedisLimiter(REDIS_URL, name, max_concurrency=1, poll_interval_s=0.01)
    try:
        async with limiter.acquire():
            waiter = asyncio.create_task(run_holders([limiter], tasks_each=1, hold_s=0))
            await asyncio.sleep(0.1)
            assert not waiter.done()
            waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        with pytest.raises(KeyError):
            async with limiter.acquire():
                raise KeyError("boom")
        assert await limiter.in_use() == 0
    finally:
        await limiter.aclose()


async def test_a_crashed_process_gives_its_slot_back_when_the_lease_expires(name: str) -> None:
    child = (
        "import asyncio, os, sys\n"
        "from judges.limits import RedisLimiter\n"
        "async def main():\n"
        f"    lim = RedisLimiter({REDIS_URL!r}, {name!r}, max_concurrency=1, lease_ttl_s=3.0)\n"
        "    await lim.acquire().__aenter__()\n"
        "    print('held', flush=True)\n"
        "    os._exit(0)\n"
        "asyncio.run(main())\n"
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", child, cwd=REPO_ROOT, stdout=subprocess.PIPE
    )
    out, _ = await asyncio.wait_for(proc.communicate(), timeout=30)
    assert out.strip() == b"held"
    limiter = RedisLimiter(REDIS_URL, name, max_concurrency=1, poll_interval_s=0.05)
    try:
        assert await limiter.in_use() == 1  # the dead process never released its lease
        async with asyncio.timeout(15):
            async with limiter.acquire():
                assert await limiter.in_use() == 1
    finally:
        await limiter.aclose()


async def test_a_long_holder_keeps_its_lease_past_its_ttl(name: str) -> None:
    """The lease is renewed while its holder is still there (the renewal starts only after a
    third of the lease's life), so a call longer than the lease keeps out the next one."""
    holder, other = await two_limiters(name, max_concurrency=1, lease_ttl_s=0.6)
    try:
        async with holder.acquire():
            await asyncio.sleep(1.5)  # two and a half lease lives
            assert await other.in_use() == 1
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.5):
                    async with other.acquire():
                        pytest.fail("a second holder got in while the first held its lease")
        async with asyncio.timeout(5):
            async with other.acquire():
                assert await other.in_use() == 1
        assert await other.in_use() == 0
    finally:
        await holder.aclose()
        await other.aclose()


async def test_two_redis_limiters_share_one_rate(name: str) -> None:
    limiters = await two_limiters(name, rpm=4, window_s=30.0)
    granted = 0

    async def start(limiter: RedisLimiter) -> None:
        nonlocal granted
        async with limiter.acquire():
            granted += 1

    tasks = [asyncio.create_task(start(lim)) for lim in limiters for _ in range(3)]
    try:
        async with asyncio.timeout(10):
            while granted < 4:
                await asyncio.sleep(0.01)
        await asyncio.sleep(0.3)
        assert granted == 4  # the other two wait for the 30 s window to move
        assert sum(t.done() for t in tasks) == 4
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for limiter in limiters:
            await limiter.aclose()


_COUNT_IN_WINDOW = """
local t = redis.call('TIME'); local now = t[1] * 1000 + t[2] / 1000
return redis.call('ZCOUNT', KEYS[1], '(' .. (now - tonumber(ARGV[1])), '+inf')
"""


async def test_redis_rate_window_refills_and_never_overflows(
    name: str, redis_client: aioredis.Redis
) -> None:
    limiters = await two_limiters(name, rpm=3, window_s=1.0, max_concurrency=2)
    count_in_window = redis_client.register_script(_COUNT_IN_WINDOW)
    peak = 0
    done = asyncio.Event()

    async def watch() -> None:
        nonlocal peak
        while not done.is_set():
            count = int(await count_in_window(keys=[limiters[0].rate_key], args=[1000]))
            peak = max(peak, count)
            await asyncio.sleep(0.01)

    watcher = asyncio.create_task(watch())
    try:
        async with asyncio.timeout(30):
            await run_holders(list(limiters), tasks_each=4, hold_s=0)
    finally:
        done.set()
        await watcher
        for limiter in limiters:
            await limiter.aclose()
    assert peak == 3  # eight starts went through, never more than three per second


async def test_unreachable_redis_raises_limiter_unavailable() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    limiter = RedisLimiter(f"redis://127.0.0.1:{port}/0", "x", max_concurrency=1)
    try:
        with pytest.raises(LimiterUnavailable):
            async with limiter.acquire():
                pass
    finally:
        await limiter.aclose()


async def test_a_redis_that_stops_answering_raises_instead_of_hanging() -> None:
    with silent_port() as port:
        limiter = RedisLimiter(f"redis://127.0.0.1:{port}/0", "x", max_concurrency=1, timeout_s=0.3)
        try:
            with pytest.raises(LimiterUnavailable):
                async with asyncio.timeout(30):  # a hang fails here instead
                    async with limiter.acquire():
                        pass
        finally:
            await limiter.aclose()
