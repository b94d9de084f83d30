"""Load figures (issue 9): many concurrent clients against a real ``plaudit serve`` process.

For each set-up (the embedded SQLite default, and Postgres + Redis) a fresh server starts on a
free loopback port; then, route by route, ``--clients`` concurrent clients send requests back
to back for ``--duration`` seconds: ordinal advantages, group diversity and composite
rewards/group (a diversity channel with GRPO advantages). Every request names a ``run_id``, so
each group is written to the store. Reported per route: requests/s, p50/p99 latency and the
count of each status. Texts differ from request to request, so no cache serves a repeat.

Run (one configuration at a time; it loads every core):

    nice -n 10 .venv/bin/python -m bench.bench_load --setup sqlite --out load_sqlite.json
    nice -n 10 .venv/bin/python -m bench.bench_load --setup postgres \\
        --database-url postgresql+asyncpg://postgres@127.0.0.1:5432/inject_bench \\
        --redis-url redis://127.0.0.1:6379/13 --out load_pg.json
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import random
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from bench.common import machine, plaudit_server

WORDS = [
    "river",
    "stone",
    "cloud",
    "engine",
    "garden",
    "signal",
    "paper",
    "winter",
    "copper",
    "lantern",
    "market",
    "bridge",
    "orbit",
    "violin",
    "harbor",
    "meadow",
    "cipher",
    "canyon",
    "pixel",
    "thunder",
    "saddle",
    "quartz",
    "ember",
    "falcon",
]
Payload = Callable[[int, str], dict[str, Any]]


def _text(rng: random.Random, n: int = 12) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def ordinal(i: int, run_id: str) -> dict[str, Any]:
    rng = random.Random(i)
    return {
        "groups": [{"scores": [rng.randint(1, 5) for _ in range(8)]}],
        "k": 5,
        "run_id": run_id,
        "step": i,
    }


def diversity(i: int, run_id: str) -> dict[str, Any]:
    rng = random.Random(i)
    return {"completions": [_text(rng) for _ in range(8)], "run_id": run_id, "step": i}


def rewards(i: int, run_id: str) -> dict[str, Any]:
    rng = random.Random(i)
    return {
        "prompt": f"Describe a {rng.choice(WORDS)}.",
        "completions": [_text(rng) for _ in range(8)],
        "spec": {"channels": {"diversity": {"weight": 1.0}}, "advantage": "grpo"},
        "run_id": run_id,
        "step": i,
    }


ROUTES: dict[str, tuple[str, Payload]] = {
    "ordinal": ("/v1/ordinal/advantages", ordinal),
    "diversity": ("/v1/diversity/group", diversity),
    "rewards": ("/v1/rewards/group", rewards),
}


async def hammer(
    base: str, path: str, payload: Payload, run_id: str, clients: int, duration: float
) -> dict[str, Any]:
    """``clients`` loops posting back to back for ``duration`` seconds; figures of the run."""
    latencies: list[float] = []
    statuses: Counter[str] = Counter()
    samples: dict[str, str] = {}  # the first answer of each failing status, to say why
    counter = itertools.count()
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=base, timeout=60, limits=limits) as client:
        began = time.perf_counter()
        deadline = began + duration

        async def one_client() -> None:
            while time.perf_counter() < deadline:
                body = payload(next(counter), run_id)
                start = time.perf_counter()
                try:
                    response = await client.post(path, json=body)
                    status = str(response.status_code)
                    if response.status_code != 200:
                        samples.setdefault(status, response.text[:300])
                except httpx.HTTPError as exc:
                    status = type(exc).__name__
                    samples.setdefault(status, repr(exc)[:300])
                statuses[status] += 1
                latencies.append(time.perf_counter() - start)

        await asyncio.gather(*(one_client() for _ in range(clients)))
        elapsed = time.perf_counter() - began
    latencies.sort()
    ok = statuses.get("200", 0)
    return {
        "requests": len(latencies),
        "ok": ok,
        "errors": {k: v for k, v in statuses.items() if k != "200"},
        "error_samples": samples,
        "requests_per_s": round(len(latencies) / elapsed, 1),
        "p50_ms": round(1000 * statistics.median(latencies), 1) if latencies else None,
        "p99_ms": round(1000 * latencies[int(0.99 * (len(latencies) - 1))], 1)
        if latencies
        else None,
        "seconds": round(elapsed, 1),
    }


def stored_groups(base: str, run_id: str) -> int | None:
    response = httpx.get(f"{base}/v1/runs/{run_id}/groups", params={"limit": 1}, timeout=30)
    return int(response.json()["total"]) if response.status_code == 200 else None


def migrate(database_url: str) -> None:
    plaudit = Path(sys.executable).with_name("plaudit")
    env = {"PLAUDIT_DATABASE_URL": database_url, "PATH": str(plaudit.parent)}
    subprocess.run([str(plaudit), "db", "upgrade"], env=env, check=True)


def run_setup(setup: str, args: argparse.Namespace) -> dict[str, Any]:
    env: dict[str, str] = {}
    if setup == "postgres":
        env = {"PLAUDIT_DATABASE_URL": args.database_url, "PLAUDIT_REDIS_URL": args.redis_url}
        migrate(args.database_url)
    figures: dict[str, Any] = {}
    with plaudit_server("all", env) as base:
        for name in args.routes.split(","):
            path, payload = ROUTES[name]
            run_id = f"load-{name}-{int(time.time())}"
            asyncio.run(hammer(base, path, payload, f"{run_id}-warmup", 8, 2.0))
            result = asyncio.run(hammer(base, path, payload, run_id, args.clients, args.duration))
            # every 200 stored its group once: the count must equal the 200s
            result["stored_groups"] = stored_groups(base, run_id)
            figures[name] = result
            print(setup, name, json.dumps(result), flush=True)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--setup", choices=["sqlite", "postgres", "both"], default="sqlite")
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--duration", type=float, default=30.0)
    parser.add_argument("--routes", default=",".join(ROUTES))
    parser.add_argument(
        "--database-url", default="postgresql+asyncpg://postgres@127.0.0.1:5432/plaudit_bench"
    )
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/13")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    setups = ["sqlite", "postgres"] if args.setup == "both" else [args.setup]
    report: dict[str, Any] = {
        "machine": machine(),
        "clients": args.clients,
        "duration_s": args.duration,
        "setups": {s: run_setup(s, args) for s in setups},
    }
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=2)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
