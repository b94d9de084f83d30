"""ODRPO vs plain GRPO advantages for 10,000 groups of 16 (issue 2). Target cost ratio <= 3x.

Measured twice: the vectorized estimators alone, and the whole service call (validation,
levels, padding, response objects), both in this process.

Run: .venv/bin/python bench/bench_ordinal.py [--repeats N] [--k K]
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Callable

import numpy as np

from bench.common import interleaved, machine
from plaudit_wire.ordinal import AdvantagesRequest, AdvantagesResponse
from services.ordinal import estimators
from services.ordinal.service import OrdinalService
from services.ordinal.settings import OrdinalSettings
from services.settings import Settings


def _advantages_call(
    service: OrdinalService, request: AdvantagesRequest
) -> Callable[[], AdvantagesResponse]:
    """One timed call of the service's advantages route logic (its own event loop)."""
    return lambda: asyncio.run(service.advantages(request))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--groups", type=int, default=10_000)
    parser.add_argument("--size", type=int, default=16)
    parser.add_argument("--k", type=int, default=10)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    scores = rng.integers(1, args.k + 1, size=(args.groups, args.size)).astype(np.float64)
    mask = np.ones_like(scores, dtype=bool)
    k = np.full(args.groups, args.k)
    math_times = interleaved(
        {
            "grpo": lambda: estimators.scalar_advantages(scores, mask, "grpo", 1e-6),
            "odrpo": lambda: estimators.odrpo_advantages(scores, mask, k),
        },
        args.repeats,
    )
    service = OrdinalService(OrdinalSettings.of(Settings()), None)
    groups = [{"scores": row} for row in scores.astype(int).tolist()]
    requests = {
        name: AdvantagesRequest.model_validate({"groups": groups, "k": args.k, "estimator": name})
        for name in ("grpo", "odrpo")
    }
    service_times = interleaved(
        {name: _advantages_call(service, req) for name, req in requests.items()},
        max(3, args.repeats // 3),
    )
    print(
        json.dumps(
            {
                "machine": machine(),
                "groups": args.groups,
                "group_size": args.size,
                "k": args.k,
                "math": {**math_times, "ratio": math_times["odrpo"] / math_times["grpo"]},
                "service": {
                    **service_times,
                    "ratio": service_times["odrpo"] / service_times["grpo"],
                },
                "target": "<= 3",
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
