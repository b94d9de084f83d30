"""How hard and how often Plaudit calls a judge server: shared limits and retry pacing.

A :class:`Limiter` hands out permission to send one request: :meth:`Limiter.acquire` is an
async context manager that waits for a concurrency slot, then for a rate token, and gives
the slot back on exit (the token is spent: the rate counts request starts).

* :class:`InProcessLimiter`: an ``asyncio.Semaphore`` and a sliding-window log of start
  times. The embedded default; limits only this process.
* :class:`RedisLimiter`: the same limits shared by every process that uses the same Redis
  and ``name``. Concurrency is a sorted set of leases scored by their expiry; a holder
  renews its lease every ``lease_ttl_s / 3``, so the slots of a crashed process come back
  after at most ``lease_ttl_s``. The rate is a sorted set of start times, a sliding window.
  Both use the Redis server's clock (``TIME`` inside Lua scripts), so hosts with skewed
  clocks still agree. Waiters poll with jitter; the order in which they are served is not
  FIFO.

``rpm`` is "requests per ``window_s`` seconds"; the default window of 60 s makes it
requests per minute (tests use a short window). Retries are paced by the one policy of
every Plaudit HTTP caller, :class:`plaudit_wire.retry.Backoff`.

Example::

    limiter = make_limiter(settings.redis_url, name="judge:vllm-a", max_concurrency=8, rpm=600)
    async with limiter.acquire():
        response = await client.post(...)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Protocol

import redis.asyncio as aioredis
from redis.commands.core import AsyncScript
from redis.exceptions import RedisError

logger = logging.getLogger(__name__)

Sleep = Callable[[float], Awaitable[None]]


class LimiterUnavailable(RuntimeError):
    """The shared limiter cannot be reached (Redis is down); no permission was granted."""


class Limiter(Protocol):
    """Permission to send one request, bounded by concurrency and rate."""

    def acquire(self) -> AbstractAsyncContextManager[None]:
        """Wait for a slot and a rate token; the slot is released when the block exits."""
        ...

    async def aclose(self) -> None:
        """Release resources (connections) the limiter owns."""
        ...


def _check_limits(max_concurrency: int | None, rpm: int | None, window_s: float) -> None:
    if max_concurrency is not None and max_concurrency < 1:
        raise ValueError("max_concurrency must be at least 1 (or None for no limit)")
    if rpm is not None and rpm < 1:
        raise ValueError("rpm must be at least 1 (or None for no limit)")
    if not window_s > 0:
        raise ValueError("window_s must be positive")


class InProcessLimiter:
    """Limits for this process only: a semaphore plus a sliding window of start times.

    ``clock`` and ``sleep`` are injectable so tests can run the window on a fake clock.

    Example::

        limiter = InProcessLimiter(max_concurrency=4, rpm=60)
        async with limiter.acquire():
            ...
    """

    def __init__(
        self,
        max_concurrency: int | None = None,
        rpm: int | None = None,
        window_s: float = 60.0,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        _check_limits(max_concurrency, rpm, window_s)
        self.max_concurrency = max_concurrency
        self.rpm = rpm
        self.window_s = window_s
        self._slots = asyncio.Semaphore(max_concurrency) if max_concurrency else None
        self._starts: deque[float] = deque()
        self._rate_lock = asyncio.Lock()
        self._clock = clock
        self._sleep = sleep

    @asynccontextmanager
    async def acquire(self) -> AsyncIterator[None]:
        """Wait for a slot, then a token; release the slot on exit."""
        if self._slots is None:
            await self._take_token()
            yield
            return
        async with self._slots:
            await self._take_token()
            yield

    async def aclose(self) -> None:
        """Nothing to release."""

    async def _take_token(self) -> None:
        if self.rpm is None:
            return
        # One waiter at a time holds the lock while it sleeps, so tokens go out in FIFO order.
        async with self._rate_lock:
            while True:
                now = self._clock()
                while self._starts and self._starts[0] <= now - self.window_s:
                    self._starts.popleft()
                if len(self._starts) < self.rpm:
                    self._starts.append(now)
                    return
                await self._sleep(self._starts[0] + self.window_s - now)


# Milliseconds on the Redis server's clock.
_NOW_MS = "local t = redis.call('TIME'); local now = t[1] * 1000 + t[2] / 1000\n"

_ACQUIRE_LEASE = (
    _NOW_MS
    + """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[3])
  redis.call('PEXPIRE', KEYS[1], math.ceil(tonumber(ARGV[2])) + 1000)
  return 1
end
return 0
"""
)

_RENEW_LEASE = (
    _NOW_MS
    + """
if redis.call('ZSCORE', KEYS[1], ARGV[2]) then
  redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[1]), ARGV[2])
  redis.call('PEXPIRE', KEYS[1], math.ceil(tonumber(ARGV[1])) + 1000)
  return 1
end
return 0
"""
)

# Returns 0 when a token was taken, else the milliseconds until the oldest start leaves.
_TAKE_TOKEN = (
    _NOW_MS
    + """
local window = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('ZADD', KEYS[1], now, ARGV[3])
  redis.call('PEXPIRE', KEYS[1], math.ceil(window) + 1000)
  return 0
end
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return math.max(1, math.ceil(tonumber(oldest[2]) + window - now))
"""
)


class RedisLimiter:
    """Limits shared through Redis by every limiter with the same ``name`` and ``prefix``.

    ``redis`` is a URL (the limiter owns the connection and closes it in :meth:`aclose`)
    or a ``redis.asyncio.Redis`` client (the caller owns it). Keys: ``lease_key`` (sorted
    set of lease id -> expiry ms) and ``rate_key`` (sorted set of start id -> start ms).
    Redis errors surface from :meth:`acquire` as :class:`LimiterUnavailable`.

    Example::

        limiter = RedisLimiter("redis://redis:6379/0", "judge:vllm-a", max_concurrency=8)
        async with limiter.acquire():
            ...
        await limiter.aclose()
    """

    def __init__(
        self,
        redis: str | aioredis.Redis,
        name: str,
        *,
        max_concurrency: int | None = None,
        rpm: int | None = None,
        window_s: float = 60.0,
        lease_ttl_s: float = 30.0,
        poll_interval_s: float = 0.05,
        prefix: str = "plaudit:limits:",
        timeout_s: float = 5.0,
    ) -> None:
        _check_limits(max_concurrency, rpm, window_s)
        if not lease_ttl_s > 0 or not poll_interval_s > 0:
            raise ValueError("lease_ttl_s and poll_interval_s must be positive")
        self._owns_client = isinstance(redis, str)
        # A Redis that stops answering (not just refuses) must not stall every judge call.
        self._redis: aioredis.Redis = (
            aioredis.from_url(  # type: ignore[no-untyped-call]
                redis, socket_timeout=timeout_s, socket_connect_timeout=timeout_s
            )
            if isinstance(redis, str)
            else redis
        )
        self.max_concurrency = max_concurrency
        self.rpm = rpm
        self.window_s = window_s
        self.lease_ttl_s = lease_ttl_s
        self.poll_interval_s = poll_interval_s
        self.lease_key = f"{prefix}{name}:leases"
        self.rate_key = f"{prefix}{name}:rate"
        self._acquire_lease = self._redis.register_script(_ACQUIRE_LEASE)
        self._renew_lease = self._redis.register_script(_RENEW_LEASE)
        self._take = self._redis.register_script(_TAKE_TOKEN)

    @asynccontextmanager
    async def acquire(self) -> AsyncIterator[None]:
        """Wait for a lease, then a token; drop the lease on exit."""
        if self.max_concurrency is None:
            await self._take_token()
            yield
            return
        lease = await self._wait_for_lease(self.max_concurrency)
        # Most calls end long before their lease needs renewing: the renewing task starts
        # only for a holder still there after a third of the lease's life, not for each call
        # (a task per upstream call was CPU that --workers paid on every call; issue 19).
        keeper: list[asyncio.Task[None]] = []
        later = asyncio.get_running_loop().call_later(
            self.lease_ttl_s / 3,
            lambda: keeper.append(asyncio.create_task(self._keep_alive(lease))),
        )
        try:
            await self._take_token()
            yield
        finally:
            later.cancel()
            for task in keeper:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            await self._release(lease)

    async def in_use(self) -> int:
        """How many leases are live now, across every process (for metrics and tests)."""
        try:
            seconds, micros = await self._redis.time()
            now_ms = seconds * 1000 + micros / 1000
            return int(await self._redis.zcount(self.lease_key, now_ms, "+inf"))
        except RedisError as exc:
            raise LimiterUnavailable(f"redis limiter unavailable: {exc}") from exc

    async def aclose(self) -> None:
        """Close the Redis connection if this limiter opened it."""
        if self._owns_client:
            await self._redis.aclose()

    async def _wait_for_lease(self, limit: int) -> str:
        lease = uuid.uuid4().hex
        args: list[float | int | str] = [limit, self.lease_ttl_s * 1000, lease]
        while not await self._call(self._acquire_lease, self.lease_key, args):
            await asyncio.sleep(self._jittered(self.poll_interval_s))
        return lease

    async def _take_token(self) -> None:
        if self.rpm is None:
            return
        while True:
            args: list[float | int | str] = [self.rpm, self.window_s * 1000, uuid.uuid4().hex]
            wait_ms = int(await self._call(self._take, self.rate_key, args))
            if wait_ms == 0:
                return
            # Others wait for the same moment; a little jitter spreads the stampede.
            await asyncio.sleep(wait_ms / 1000 + self._jittered(self.poll_interval_s) / 2)

    async def _keep_alive(self, lease: str) -> None:
        """Renew ``lease`` now, then every third of its life, until cancelled."""
        while True:
            try:
                renewed = await self._call(
                    self._renew_lease, self.lease_key, [self.lease_ttl_s * 1000, lease]
                )
            except LimiterUnavailable as exc:
                logger.warning("could not renew limiter lease on %s: %s", self.lease_key, exc)
            else:
                if not renewed:
                    logger.warning(
                        "limiter lease on %s expired before renewal; the limit may be exceeded",
                        self.lease_key,
                    )
                    return
            await asyncio.sleep(self.lease_ttl_s / 3)

    async def _release(self, lease: str) -> None:
        try:
            await self._redis.zrem(self.lease_key, lease)
        except RedisError as exc:  # the lease expires on its own
            logger.warning("could not release limiter lease on %s: %s", self.lease_key, exc)

    async def _call(self, script: AsyncScript, key: str, args: list[float | int | str]) -> int:
        try:
            result = await script(keys=[key], args=args)
        except RedisError as exc:
            raise LimiterUnavailable(f"redis limiter unavailable: {exc}") from exc
        return int(result)

    @staticmethod
    def _jittered(seconds: float) -> float:
        return seconds * random.uniform(0.5, 1.5)


def make_limiter(
    redis_url: str | None,
    *,
    name: str,
    max_concurrency: int | None = None,
    rpm: int | None = None,
    window_s: float = 60.0,
) -> Limiter:
    """A :class:`RedisLimiter` when a Redis URL is configured, else an in-process one.

    Example::

        limiter = make_limiter(None, name="judge", max_concurrency=16)
    """
    if redis_url:
        return RedisLimiter(
            redis_url, name, max_concurrency=max_concurrency, rpm=rpm, window_s=window_s
        )
    return InProcessLimiter(max_concurrency=max_concurrency, rpm=rpm, window_s=window_s)
