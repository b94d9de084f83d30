"""What the limiter shared through Redis costs per upstream call (issue 19).

With ``--workers`` (or any Redis URL) every upstream call of an ``openai`` backend first
takes a lease from :class:`judges.limits.RedisLimiter` and gives it back after. This bench
holds ``--calls`` leases, ``--clients`` at a time, each for ``--hold-ms`` (the judge's
latency), and reports this process's CPU per call and the wall time per call. Against older
code, copy this file into a worktree of that commit and run it there with ``PYTHONPATH`` set
to the worktree (it prints where ``judges`` was imported from).

    .venv/bin/python -m bench.bench_limiter --redis redis://127.0.0.1:6379/14
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
import uuid
from pathlib import Path

import judges
from bench.common import machine
from judges.limits import RedisLimiter


async def one_run(
    redis: str, calls: int, clients: int, hold_s: float, rpm: int | None
) -> dict[str, float]:
    """CPU and wall time per call for ``calls`` leases, ``clients`` held at once."""
    name = f"bench-{uuid.uuid4().hex}"
    limiter = RedisLimiter(redis, name, max_concurrency=256, rpm=rpm)
    queue = iter(range(calls))

    async def client() -> None:
        for _ in queue:
            async with limiter.acquire():
                await asyncio.sleep(hold_s)

    try:
        async with limiter.acquire():  # connect and load the scripts before timing
            pass
        start, start_cpu = time.perf_counter(), time.process_time()
        await asyncio.gather(*(client() for _ in range(clients)))
        wall, cpu = time.perf_counter() - start, time.process_time() - start_cpu
    finally:
        await limiter._redis.delete(limiter.lease_key, limiter.rate_key)
        await limiter.aclose()
    return {"cpu_ms_per_call": cpu / calls * 1000, "wall_ms_per_call": wall / calls * 1000}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/14")
    parser.add_argument("--calls", type=int, default=4000)
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--hold-ms", type=float, default=0.0)
    parser.add_argument("--rpm", type=int, default=None, help="also take a rate token")
    parser.add_argument("--repeat", type=int, default=5, help="runs; medians are reported")
    args = parser.parse_args()
    runs = [
        asyncio.run(one_run(args.redis, args.calls, args.clients, args.hold_ms / 1000, args.rpm))
        for _ in range(args.repeat)
    ]
    print(
        json.dumps(
            {
                "machine": machine(),
                "code": str(Path(judges.__file__).resolve().parent.parent),
                "calls": args.calls,
                "clients": args.clients,
                "hold_ms": args.hold_ms,
                "rpm": args.rpm,
                "cpu_ms_per_call": round(statistics.median(r["cpu_ms_per_call"] for r in runs), 4),
                "wall_ms_per_call": round(
                    statistics.median(r["wall_ms_per_call"] for r in runs), 4
                ),
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
