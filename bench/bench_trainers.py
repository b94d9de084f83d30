"""Trainer load (issue 4): many trainer workers sending rollout groups to one server.

Against a real `plaudit serve all` (embedded default, on a free port), each worker is a
trainer loop with its own ``PlauditClient``: it sends one group of G short completions to
``/v1/rewards/group`` with the spec ``diversity`` + ``judge_scale``, waits for the rewards,
and sends the next. Every group is new text (so the judge cache never answers). One worker
runs for the duration, then N workers at once for the same duration, in the same run:
groups per second, p50/p99 latency, and the N-worker throughput over the one-worker one.

Run: .venv/bin/python -m bench.bench_trainers [--duration 30] [--workers 8] [--group-size 8]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import statistics
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from bench.common import machine, plaudit_server
from bench.texts import completions
from trainer_client import PlauditClient, Timeouts

SPEC: dict[str, Any] = {
    "channels": {"diversity": {"weight": 1.0}, "judge_scale": {"weight": 1.0, "k": 5}},
    "advantage": "none",
}
PROMPT = "Explain in one sentence what the assistant computed."


# Shared by every Load: with one counter per Load, the warm-up's groups came back in the
# one-trainer phase and that phase's in the eight-trainer phase, as judge cache hits.
_SEEDS = itertools.count(1000)


class Load:
    """Unique group texts for every request, and the latencies of the finished ones."""

    def __init__(self, group_size: int) -> None:
        self._seeds = _SEEDS  # one counter for the whole run: no phase repeats another's text
        self._lock = threading.Lock()
        self.group_size = group_size
        self.latencies: list[float] = []
        self.finished_at: list[float] = []
        self.errors = 0

    def body(self, run_id: str) -> dict[str, Any]:
        with self._lock:
            seed = next(self._seeds)
        texts = completions(self.group_size, seed=seed, sentences=1)
        return {"prompt": PROMPT, "completions": texts, "spec": SPEC, "run_id": run_id}

    def record(self, seconds: float | None) -> None:
        with self._lock:
            if seconds is None:
                self.errors += 1
            else:
                self.latencies.append(seconds)
                self.finished_at.append(time.monotonic())


def worker(base: str, load: Load, run_id: str, stop_at: float) -> None:
    """One trainer: a group, its rewards, the next group, until ``stop_at``."""
    with PlauditClient(base, timeout=Timeouts(read=600)) as client:
        while time.monotonic() < stop_at:
            body = load.body(run_id)
            start = time.perf_counter()
            try:
                client.request("POST", "/v1/rewards/group", json=body)
            except Exception:
                load.record(None)
            else:
                load.record(time.perf_counter() - start)


def phase(base: str, workers: int, duration: float, group_size: int) -> dict[str, Any]:
    """Run ``workers`` trainers for ``duration`` seconds. Throughput counts the groups answered
    inside the window (the ones still in flight at its end finish, for the latencies, but do
    not count), so a short window does not favour one worker over many."""
    load = Load(group_size)
    window_start = time.monotonic()
    stop_at = window_start + duration
    threads = [
        threading.Thread(target=worker, args=(base, load, f"bench-w{workers}-{i}", stop_at))
        for i in range(workers)
    ]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    latencies = sorted(load.latencies)
    in_window = sum(t <= stop_at for t in load.finished_at)
    return {
        "workers": workers,
        "groups": in_window,
        "groups_after_window": len(latencies) - in_window,
        "errors": load.errors,
        "elapsed_s": elapsed,
        "groups_per_s": in_window / duration,
        "p50_s": statistics.median(latencies) if latencies else None,
        "p99_s": _quantile(latencies, 0.99),
    }


def merged_calls(base: str) -> dict[str, dict[str, float]]:
    """Per model worker: calls so far, and the requests and rows they carried (/metrics)."""
    text = httpx.get(f"{base}/metrics", timeout=30).text
    out: dict[str, dict[str, float]] = {}
    for line in text.splitlines():
        match = _BATCH_LINE.match(line)
        if match:
            metric, model, value = match.groups()
            out.setdefault(model, {})[_BATCH_NAMES[metric]] = float(value)
    return out


def _difference(
    after: dict[str, dict[str, float]], before: dict[str, dict[str, float]]
) -> dict[str, dict[str, float]]:
    """What one phase added, with the mean requests and rows per call."""
    out = {}
    for model, values in after.items():
        delta = {k: v - before.get(model, {}).get(k, 0.0) for k, v in values.items()}
        calls = delta.get("calls", 0.0)
        if calls:
            delta["requests_per_call"] = delta.get("requests", 0.0) / calls
            delta["rows_per_call"] = delta.get("rows", 0.0) / calls
        out[model] = delta
    return out


_BATCH_LINE = re.compile(
    r"^plaudit_model_batch_(requests_count|requests_sum|size_sum)\{model=\"([^\"]+)\"\} (\S+)$"
)


_BATCH_NAMES = {"requests_count": "calls", "requests_sum": "requests", "size_sum": "rows"}


def _quantile(sorted_values: list[float], q: float) -> float | None:
    if not sorted_values:
        return None
    return sorted_values[min(len(sorted_values) - 1, round(q * (len(sorted_values) - 1)))]


def warm_up(base: str, group_size: int) -> None:
    """Load the models and fill the first batches before anything is timed."""
    load = Load(group_size)
    with PlauditClient(base, timeout=Timeouts(read=600)) as client:
        for _ in range(2):
            client.request("POST", "/v1/rewards/group", json=load.body("bench-warmup"))


def table(one: dict[str, Any], many: dict[str, Any]) -> str:
    """The results as a markdown table."""
    rows = [
        "| workers | groups | errors | groups/s | p50 | p99 |",
        "|---|---|---|---|---|---|",
    ]
    for r in (one, many):
        rows.append(
            f"| {r['workers']} | {r['groups']} | {r['errors']} | {r['groups_per_s']:.2f} "
            f"| {_seconds(r['p50_s'])} | {_seconds(r['p99_s'])} |"
        )
    return "\n".join(rows)


def _seconds(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f} s"


def _models_dir() -> str:
    """The converted judge cache to reuse, so the server does not convert SmolLM2 again."""
    from services.settings import get_settings

    return os.environ.get("PLAUDIT_MODEL_CACHE_DIR") or str(Path(get_settings().models_dir))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--duration", type=float, default=30.0, help="seconds per phase")
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--group-size", type=int, default=8)
    args = parser.parse_args()
    with plaudit_server("all", env={"PLAUDIT_MODEL_CACHE_DIR": _models_dir()}) as base:
        warm_up(base, args.group_size)
        one = phase(base, 1, args.duration, args.group_size)
        before = merged_calls(base)
        many = phase(base, args.workers, args.duration, args.group_size)
        many["model_calls"] = _difference(merged_calls(base), before)
    result = {
        "machine": machine(),
        "spec": SPEC,
        "group_size": args.group_size,
        "duration_s": args.duration,
        "one_worker": one,
        "many_workers": many,
        "throughput_ratio": many["groups_per_s"] / one["groups_per_s"]
        if one["groups_per_s"]
        else None,
    }
    print(json.dumps(result, indent=2))
    print(table(one, many))


if __name__ == "__main__":
    main()
