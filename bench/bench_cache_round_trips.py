"""The judge cache's cost per G=8 tournament on the real Redis: one call per prompt (as the
cache asked before) against one MGET and one pipelined SET (issue 19), in one run.

A tournament is 56 prompts. The rewards route always caches, so every group looked up and
stored 56 keys; with Redis each was a round trip of its own. Measured here: the wall time and
this process's CPU for the lookups and stores of one group, each way, interleaved.

    .venv/bin/python -m bench.bench_cache_round_trips --redis redis://127.0.0.1:6379/14
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
from collections.abc import Awaitable, Callable

from bench.common import machine
from services.core.cache import RedisCache

PROMPTS = 56  # a G=8 round-robin tournament, both orders
VALUE = json.dumps({"status": "ok", "candidates": ["A", "B"], "logprobs": [-0.1, -2.4]}).encode()


async def per_key(cache: RedisCache, keys: list[str]) -> None:
    for key in keys:
        await cache.get(key)
    for key in keys:
        await cache.set(key, VALUE, 3600)


async def batched(cache: RedisCache, keys: list[str]) -> None:
    await cache.get_many(keys)
    await cache.set_many(dict.fromkeys(keys, VALUE), 3600)


async def measure(
    cache: RedisCache, ways: dict[str, Callable[[RedisCache, list[str]], Awaitable[None]]], n: int
) -> dict[str, dict[str, float]]:
    wall: dict[str, list[float]] = {name: [] for name in ways}
    cpu: dict[str, list[float]] = {name: [] for name in ways}
    for group in range(n):
        for name, way in ways.items():
            keys = [f"bench:{name}:{group}:{i}" for i in range(PROMPTS)]
            start, start_cpu = time.perf_counter(), time.process_time()
            await way(cache, keys)
            wall[name].append(time.perf_counter() - start)
            cpu[name].append(time.process_time() - start_cpu)
    return {
        name: {
            "wall_ms": statistics.median(wall[name]) * 1000,
            "cpu_ms": statistics.median(cpu[name]) * 1000,
        }
        for name in ways
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--redis", default=os.environ.get("PLAUDIT_REDIS_URL", "redis://127.0.0.1:6379/14")
    )
    parser.add_argument("--groups", type=int, default=300)
    args = parser.parse_args()
    cache = RedisCache(args.redis, prefix="plaudit:bench:")
    try:
        result = await measure(cache, {"per key": per_key, "batched": batched}, args.groups)
    finally:
        await cache._redis.flushdb()
        await cache.close()
    ratio = {k: result["per key"][k] / result["batched"][k] for k in ("wall_ms", "cpu_ms")}
    print(
        json.dumps(
            {"machine": machine(), "groups": args.groups, **result, "ratio": ratio}, indent=1
        )
    )


if __name__ == "__main__":
    asyncio.run(main())
