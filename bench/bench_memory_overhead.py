"""Revision overhead (issue 12): trainer throughput with adaptive rubric scoring, the memory's
background revision on vs off, in one run of one server; and the latency of each revision.

A fresh ``plaudit serve all`` (the embedded SmolLM2 judge scores, and writes the analyses and
edits; the bundled MiniLM embeds). ``--trainers`` clients play trainers: each its own run,
each step ``--groups-per-step`` groups of ``--group-size`` completions sent together, then the
next step. Phases follow ``--cycle`` (default off, memory, on), ``--rounds`` times, for
``--phase-s`` seconds each, with fresh run ids per phase: *off* scores with ``adaptive: false``
(nothing goes to the memory); *memory* with ``adaptive: true`` and each run paused as soon as
the memory knows it (groups ingested and steps summarised, no revision); *on* with
``adaptive: true`` (a revision job every ``PLAUDIT_MEMORY_REVISE_EVERY`` steps of each run,
the analyst and editor per ``--llm``). Throughput = scored groups per second of the phase,
summed over the phases of a mode; each mode's ratio to *off* is the figure. After each *on*
phase the script waits for the revisions it started (the trainers do not: that backlog, and
each revision's latency from queued to finished, are reported separately).

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python -m bench.bench_memory_overhead \\
        --llm local --rounds 2 --phase-s 60 --out memory_overhead.json

``--llm standin`` is the production shape (issue 24): the analyst and editor on an
OpenAI-compatible server (``PLAUDIT_MEMORY_LLM=openai``), here the loopback stand-in of
``tests/judges/openai_standin.py`` answering schema-valid JSON after a GPU server's latency
(0.2 s to the first token, 50 tokens/s), while the judge stays local. The guard's re-scoring
(``PLAUDIT_MEMORY_FROZEN_ROLLOUTS`` stored completions scored by the judge before a version is
used) still runs on the judge: ``--frozen-rollouts 0`` turns it off, so two runs show its cost
apart.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import statistics
import time
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from bench.bench_load import WORDS
from bench.common import machine, plaudit_server

RUBRIC = {
    "name": "bench-memory",
    "question": "Describe a place you know well.",
    "criteria": [
        {"text": "Names the place that is described", "weight": 2, "anchor": True},
        {"text": "Mentions at least one sound of the place", "weight": 1},
        {"text": "Repeats the same word many times", "weight": 1, "kind": "pitfall"},
    ],
}


def _group(rng: random.Random, size: int) -> list[str]:
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 24))) for _ in range(size)]


async def trainer(
    client: httpx.AsyncClient,
    run_id: str,
    rubric_id: str,
    adaptive: bool,
    deadline: float,
    args: argparse.Namespace,
    seed: int,
) -> tuple[int, int]:
    """Steps until the deadline; (groups scored, failures)."""
    rng = random.Random(seed)
    done = failed = 0
    step = 0
    spec = {"channels": {"rubric": {"rubric_id": rubric_id, "adaptive": adaptive}}}
    while time.perf_counter() < deadline:
        step += 1
        bodies = [
            {
                "prompt": RUBRIC["question"],
                "completions": _group(rng, args.group_size),
                "run_id": run_id,
                "step": step,
                "spec": spec,
            }
            for _ in range(args.groups_per_step)
        ]
        answers = await asyncio.gather(
            *(client.post("/v1/rewards/group", json=b) for b in bodies), return_exceptions=True
        )
        for answer in answers:
            ok = isinstance(answer, httpx.Response) and answer.status_code == 200
            done += ok
            failed += not ok
    return done, failed


async def phase(
    base: str, rubric_id: str, mode: str, index: int, args: argparse.Namespace
) -> dict[str, Any]:
    tag = f"{mode}-{index}-{int(time.time())}"
    runs = [f"bench-mem-{tag}-t{i}" for i in range(args.trainers)]
    adaptive = mode != "off"
    async with httpx.AsyncClient(base_url=base, timeout=600) as client:
        began = time.perf_counter()
        deadline = began + args.phase_s
        work = [
            trainer(client, run, rubric_id, adaptive, deadline, args, 1000 * index + i)
            for i, run in enumerate(runs)
        ]
        pausing = [pause_early(client, runs, deadline)] if mode == "memory" else []
        results = (await asyncio.gather(*work, *pausing))[: len(runs)]
        elapsed = time.perf_counter() - began
        out: dict[str, Any] = {
            "mode": mode,
            "seconds": round(elapsed, 1),
            "groups": sum(r[0] for r in results),
            "failed": sum(r[1] for r in results),
        }
        out["groups_per_s"] = round(out["groups"] / elapsed, 3)
        if mode == "on":
            out.update(await settle(client, runs))
    print(json.dumps(out), flush=True)
    return out


async def pause_early(
    client: httpx.AsyncClient, runs: list[str], deadline: float
) -> tuple[int, int]:
    """The *memory* phase: pause each run as soon as the memory knows it (before its first
    revision is due), so groups are ingested and steps summarised but nothing is revised."""
    waiting = set(runs)
    while waiting and time.perf_counter() < deadline:
        for run in sorted(waiting):
            if (await client.post(f"/v1/memory/runs/{run}/pause")).status_code == 200:
                waiting.discard(run)
        await asyncio.sleep(0.5)
    return 0, 0


async def settle(client: httpx.AsyncClient, runs: list[str]) -> dict[str, Any]:
    """Wait for the phase's revisions; their latencies and states."""
    began = time.perf_counter()
    while True:
        items = []
        for run in runs:
            response = await client.get(f"/v1/memory/runs/{run}/revisions")
            if response.status_code == 200:
                items += response.json()["items"]
        if all(i["state"] not in ("queued", "running") for i in items):
            break
        await asyncio.sleep(2)
    latencies = [
        (
            datetime.fromisoformat(i["updated_at"]) - datetime.fromisoformat(i["created_at"])
        ).total_seconds()
        for i in items
    ]
    states: dict[str, int] = {}
    for i in items:
        states[i["state"]] = states.get(i["state"], 0) + 1
    guard = [i.get("detail", {}).get("flips", {}) for i in items]
    return {
        "revisions": len(items),
        "revision_states": states,
        # The guard's re-scoring, timed inside each revision (services/memory/oscillation.py)
        "guard_seconds": round(sum(g.get("seconds", 0.0) for g in guard), 2),
        "guard_rescored": sum(2 * g.get("compared", 0) for g in guard),
        "revision_latency_s": {
            "median": round(statistics.median(latencies), 1) if latencies else None,
            "max": round(max(latencies), 1) if latencies else None,
        },
        "backlog_wait_s": round(time.perf_counter() - began, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trainers", type=int, default=8)
    parser.add_argument("--groups-per-step", type=int, default=2)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--cycle", default="off,memory,on", help="phase modes, in order")
    parser.add_argument("--rounds", type=int, default=2, help="times the cycle runs")
    parser.add_argument(
        "--llm", default="local", help="PLAUDIT_MEMORY_LLM: judge, local, or standin (openai)"
    )
    parser.add_argument(
        "--frozen-rollouts", type=int, default=None, help="the guard's re-scored completions"
    )
    parser.add_argument("--phase-s", type=float, default=60.0)
    parser.add_argument("--revise-every", type=int, default=3)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    cache = Path.home() / ".cache" / "plaudit-test" / "models"
    env = {
        "PLAUDIT_MEMORY_REVISE_EVERY": str(args.revise_every),
        "PLAUDIT_MEMORY_LLM": args.llm,
        "PLAUDIT_MODEL_CACHE_DIR": os.environ.get("PLAUDIT_MODEL_CACHE_DIR", str(cache)),
    }
    if args.frozen_rollouts is not None:
        env["PLAUDIT_MEMORY_FROZEN_ROLLOUTS"] = str(args.frozen_rollouts)
    with contextlib.ExitStack() as stack:
        if args.llm == "standin":
            from tests.judges.openai_standin import MODEL, stand_in_server

            standin = stack.enter_context(stand_in_server())
            env |= {
                "PLAUDIT_MEMORY_LLM": "openai",
                "PLAUDIT_MEMORY_LLM_BASE_URL": standin.url("memory", "bench"),
                "PLAUDIT_MEMORY_LLM_MODEL": MODEL,
            }
        phases, modes = run_phases(env, args)
    report = summary(phases, modes, args)
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))


def run_phases(env: dict[str, str], args: argparse.Namespace) -> tuple[list[Any], list[str]]:
    """One server, the rubric, then every phase in order."""
    with plaudit_server("all", env) as base:
        created = httpx.post(f"{base}/v1/rubrics", json=RUBRIC, timeout=60)
        created.raise_for_status()
        rubric_id = created.json()["id"]
        modes = args.cycle.split(",") * args.rounds
        phases = [asyncio.run(phase(base, rubric_id, m, i, args)) for i, m in enumerate(modes)]
    return phases, modes


def paired_ratios(phases: list[dict[str, Any]], mode: str, reference: str = "off") -> list[float]:
    """Each ``mode`` phase's throughput over the mean of the ``reference`` phases beside it.

    On a shared machine the load drifts by more than the effect (two *off* phases a few minutes
    apart differed by 7 to 18%), so a pooled ratio mixes the drift in; a phase compared with
    its neighbours sees the same load, and the spread of these ratios shows what is left.

    >>> paired_ratios([{"mode": "off", "groups_per_s": 1.0}, {"mode": "on", "groups_per_s": 0.9},
    ...                {"mode": "off", "groups_per_s": 0.8}], "on")
    [1.0]
    """
    out = []
    for index, current in enumerate(phases):
        if current["mode"] != mode:
            continue
        before = _nearest(reversed(phases[:index]), reference)
        after = _nearest(phases[index + 1 :], reference)
        neighbours = [p["groups_per_s"] for p in (before, after) if p is not None]
        if neighbours and statistics.fmean(neighbours) > 0:
            out.append(round(current["groups_per_s"] / statistics.fmean(neighbours), 4))
    return out


def _nearest(phases: Iterable[dict[str, Any]], mode: str) -> dict[str, Any] | None:
    return next((p for p in phases if p["mode"] == mode), None)


def spread(ratios: list[float]) -> dict[str, Any]:
    """Median, quartiles and range of paired ratios, and the overhead the median gives.

    >>> spread([0.9, 1.0, 0.95])["overhead_pct"]
    5.0
    """
    if not ratios:
        return {"n": 0}
    quartiles = statistics.quantiles(ratios, n=4, method="inclusive") if len(ratios) > 1 else []
    q1, q3 = (quartiles[0], quartiles[2]) if quartiles else (ratios[0], ratios[0])
    median = statistics.median(ratios)
    return {
        "n": len(ratios),
        "median": round(median, 3),
        "q1": round(q1, 3),
        "q3": round(q3, 3),
        "min": round(min(ratios), 3),
        "max": round(max(ratios), 3),
        "overhead_pct": round(100 * (1 - median), 1),
    }


def summary(phases: list[Any], modes: list[str], args: argparse.Namespace) -> dict[str, Any]:
    rate = {}
    for name in dict.fromkeys(modes):
        ps = [p for p in phases if p["mode"] == name]
        rate[name] = sum(p["groups"] for p in ps) / sum(p["seconds"] for p in ps)
    paired = {k: spread(paired_ratios(phases, k)) for k in rate if k != "off"}
    if "memory" in rate and "on" in rate:
        # Revision alone: adaptive scoring with the memory is in both (issue 24).
        paired["on_vs_memory"] = spread(paired_ratios(phases, "on", "memory"))
    return {
        "machine": machine(),
        "args": vars(args),
        "phases": phases,
        "groups_per_s": {k: round(v, 3) for k, v in rate.items()},
        "ratio_to_off": {k: round(v / rate["off"], 3) for k, v in rate.items()},
        "overhead_pct": {k: round(100 * (1 - v / rate["off"]), 1) for k, v in rate.items()},
        "paired": paired,
    }


if __name__ == "__main__":
    main()
