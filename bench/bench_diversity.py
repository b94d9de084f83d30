"""Diversity benchmarks (issue 2).

1. HTTP vs in-process: one /v1/diversity/group request with 64 completions against a real
   `plaudit serve`, vs embedding the same 64 texts directly with the same model and computing
   the same metric in this process. Target ratio <= 1.15.
2. Micro-batching: 64 concurrent single-group requests vs one /v1/diversity/groups request with
   the same 64 groups. Target throughput ratio within 1.5x.

Run: .venv/bin/python bench/bench_diversity.py [--repeats N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

import httpx

from bench.common import interleaved, machine, plaudit_server
from bench.texts import completions
from services.core.models.embedder import load_embedder
from services.diversity import metrics


def http_vs_direct(base: str, repeats: int) -> dict[str, Any]:
    texts = completions(64, seed=1)
    embedder = load_embedder("bundled")
    client = httpx.Client(base_url=base, timeout=120)

    def direct() -> None:
        e = embedder.embed(texts)
        metrics.scale(metrics.raw_diversity(e, "centroid"), "minmax", 1e-6)

    def over_http() -> None:
        r = client.post("/v1/diversity/group", json={"completions": texts})
        r.raise_for_status()

    times = interleaved({"direct": direct, "http": over_http}, repeats)
    client.close()
    return {
        "completions": len(texts),
        "direct_s": times["direct"],
        "http_s": times["http"],
        "ratio": times["http"] / times["direct"],
        "target": "<= 1.15",
    }


def concurrent_vs_batched(
    base: str, repeats: int, groups: int = 64, size: int = 8
) -> dict[str, Any]:
    payload = [
        {"id": f"g{i}", "completions": completions(size, seed=100 + i)} for i in range(groups)
    ]

    async def concurrent() -> None:
        limits = httpx.Limits(max_connections=groups)
        async with httpx.AsyncClient(base_url=base, timeout=300, limits=limits) as client:
            responses = await asyncio.gather(
                *(client.post("/v1/diversity/group", json=g) for g in payload)
            )
            for r in responses:
                r.raise_for_status()

    async def batched() -> None:
        async with httpx.AsyncClient(base_url=base, timeout=300) as client:
            r = await client.post("/v1/diversity/groups", json={"groups": payload})
            r.raise_for_status()

    times = interleaved(
        {
            "concurrent": lambda: asyncio.run(concurrent()),
            "batched": lambda: asyncio.run(batched()),
        },
        repeats,
    )
    return {
        "groups": groups,
        "group_size": size,
        "concurrent_s": times["concurrent"],
        "batched_s": times["batched"],
        "throughput_ratio": times["concurrent"] / times["batched"],
        "target": "<= 1.5",
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    with plaudit_server("diversity") as base:
        result = {
            "machine": machine(),
            "http_vs_direct": http_vs_direct(base, args.repeats),
            "concurrent_vs_batched": concurrent_vs_batched(base, args.repeats),
        }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
