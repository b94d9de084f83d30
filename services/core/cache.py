"""A small key-value cache: Redis when configured, an in-process LRU in the embedded default."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Protocol

import redis.asyncio as aioredis
from redis import exceptions as redis_errors

from services.core.outages import cache_unavailable, is_redis_outage


class Cache(Protocol):
    """Bytes in, bytes out, with an optional time to live in seconds.

    ``get``, ``set`` and ``delete`` raise :class:`~services.core.errors.CacheUnavailable`
    when the store cannot be reached. ``get_many`` and ``set_many`` are one round trip for
    many keys (a G=8 tournament asks for 56; issue 19).
    """

    async def get(self, key: str) -> bytes | None: ...

    async def set(self, key: str, value: bytes, ttl: float | None = None) -> None: ...

    async def get_many(self, keys: Sequence[str]) -> list[bytes | None]: ...

    async def set_many(self, items: Mapping[str, bytes], ttl: float | None = None) -> None: ...

    async def delete(self, key: str) -> None: ...

    async def ping(self) -> bool: ...

    async def close(self) -> None: ...


class MemoryCache:
    """In-process LRU with per-entry expiry; the embedded stand-in for Redis."""

    def __init__(self, max_entries: int = 50_000) -> None:
        self._max = max_entries
        self._data: OrderedDict[str, tuple[bytes, float | None]] = OrderedDict()

    async def get(self, key: str) -> bytes | None:
        entry = self._data.get(key)
        if entry is None:
            return None
        value, expires = entry
        if expires is not None and expires < time.monotonic():
            del self._data[key]
            return None
        self._data.move_to_end(key)
        return value

    async def set(self, key: str, value: bytes, ttl: float | None = None) -> None:
        expires = time.monotonic() + ttl if ttl else None
        self._data[key] = (value, expires)
        self._data.move_to_end(key)
        while len(self._data) > self._max:
            self._data.popitem(last=False)

    async def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        return [await self.get(key) for key in keys]

    async def set_many(self, items: Mapping[str, bytes], ttl: float | None = None) -> None:
        for key, value in items.items():
            await self.set(key, value, ttl)

    async def delete(self, key: str) -> None:
        self._data.pop(key, None)

    async def ping(self) -> bool:
        return True

    async def close(self) -> None:
        self._data.clear()


class RedisCache:
    """Redis-backed cache shared by every Plaudit process; keys live under a prefix.

    A lost Redis is a :class:`CacheUnavailable` after at most ``timeout_s`` (never a hang);
    the client reconnects by itself once Redis is back.
    """

    def __init__(self, url: str, prefix: str = "plaudit:cache:", timeout_s: float = 2.0) -> None:
        self._redis = aioredis.from_url(  # type: ignore[no-untyped-call]
            url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s
        )
        self._prefix = prefix

    async def get(self, key: str) -> bytes | None:
        async with _redis_outage():
            value = await self._redis.get(self._prefix + key)
        return bytes(value) if value is not None else None

    async def set(self, key: str, value: bytes, ttl: float | None = None) -> None:
        async with _redis_outage():
            if ttl:
                await self._redis.set(self._prefix + key, value, px=int(ttl * 1000))
            else:
                await self._redis.set(self._prefix + key, value)

    async def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        """One MGET for every key."""
        if not keys:
            return []
        async with _redis_outage():
            values = await self._redis.mget([self._prefix + key for key in keys])
        return [bytes(v) if v is not None else None for v in values]

    async def set_many(self, items: Mapping[str, bytes], ttl: float | None = None) -> None:
        """Every SET in one pipelined round trip (not a transaction: each stands alone)."""
        if not items:
            return
        async with _redis_outage():
            pipe = self._redis.pipeline(transaction=False)
            for key, value in items.items():
                pipe.set(self._prefix + key, value, px=int(ttl * 1000) if ttl else None)
            await pipe.execute()

    async def delete(self, key: str) -> None:
        async with _redis_outage():
            await self._redis.delete(self._prefix + key)

    async def ping(self) -> bool:
        try:
            return bool(await self._redis.ping())
        except Exception:
            return False

    async def close(self) -> None:
        await self._redis.aclose()


@asynccontextmanager
async def _redis_outage() -> AsyncIterator[None]:
    try:
        yield
    except (redis_errors.RedisError, OSError) as exc:
        if is_redis_outage(exc):  # the one mapping (services.core.outages)
            raise cache_unavailable() from exc
        raise


def make_cache(redis_url: str | None) -> Cache:
    """Redis when a URL is configured, else the in-process LRU."""
    return RedisCache(redis_url) if redis_url else MemoryCache()
