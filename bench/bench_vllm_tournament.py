"""A G=8 round-robin tournament against a real vLLM server: batched through Plaudit against
the same prompts sent naively, one chat call each (issue 19).

One run starts vLLM (its own venv: ``scripts/vllm_stage.sh`` makes it) serving the bundled
SmolLM2, and two ``plaudit serve judge`` in front of it: *batched* (the judge's tokenizer
known, compat ``vllm``: one ``/v1/completions`` call with the 56 rendered prompts in
order) and *naive* (compat ``openai``: one chat call per prompt, all 56 in flight at once).
Each repetition sends one new group to each (alternating which goes first, texts never seen
before, so neither finds the other's prompts in vLLM's prefix cache) and times it; the
ratio is batched over naive wall time (<= 1.0: batching costs nothing).

Run: ``.venv/bin/python -m bench.bench_vllm_tournament --repeat 6``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from bench.bench_overhead import started
from bench.common import free_port, machine
from judges.backends.convert import resolve_model_dir

SERVED = "smollm2-135m"
DEFAULT_VENV = Path.home() / ".cache" / "plaudit" / "vllm-venv"
DEFAULT_CACHE = Path.home() / ".cache" / "plaudit-test" / "models"


@contextlib.contextmanager
def vllm_server(venv: Path, model_dir: Path, work: Path) -> Iterator[str]:
    port = free_port()
    cmd = [str(venv / "bin" / "python"), "-m", "vllm.entrypoints.openai.api_server"]
    cmd += ["--model", str(model_dir), "--served-model-name", SERVED, "--host", "127.0.0.1"]
    cmd += ["--port", str(port), "--dtype", "float32", "--max-model-len", "2048"]
    cmd += ["--enforce-eager"]
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1"}
    base = f"http://127.0.0.1:{port}"
    with started(cmd, env, work / "vllm.log", f"{base}/v1/models", within=900):
        yield f"{base}/v1"


@contextlib.contextmanager
def judge_server(vllm: str, work: Path, name: str, compat: str) -> Iterator[str]:
    port = free_port()
    folder = work / name
    folder.mkdir()
    env = {
        **os.environ,
        "PLAUDIT_DATA_DIR": str(folder / "data"),
        "PLAUDIT_JUDGE_BACKEND": "openai",
        "PLAUDIT_JUDGE_BASE_URL": vllm,
        "PLAUDIT_JUDGE_MODEL": SERVED,
        "PLAUDIT_JUDGE_COMPAT": compat,
    }
    script = Path(sys.executable).with_name("plaudit")
    plaudit = [str(script)] if script.exists() else [sys.executable, "-m", "services.cli"]
    cmd = [*plaudit, "serve", "judge", "--host", "127.0.0.1", "--port", str(port)]
    base = f"http://127.0.0.1:{port}"
    with started(cmd, env, folder / "plaudit.log", f"{base}/health/ready", within=300):
        yield base


def group(index: int) -> dict[str, Any]:
    """Eight answers never sent before (``index`` is unique per request)."""
    question = f"Case {index}: a train leaves at {index % 12 + 1} o'clock and takes 95 minutes."
    answers = [
        f"Answer {index}.{k}: it arrives at {index % 12 + 2}:{35 + k:02d}, since 95 minutes "
        f"is one hour and {35 + k} minutes{' plus a check of the units' * (k % 3)}."
        for k in range(8)
    ]
    return {
        "prompt": question + " When does it arrive?",
        "completions": answers,
        "pairing": "round_robin",
        "cache": False,
    }


def timed(client: httpx.Client, base: str, body: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    start = time.perf_counter()
    response = client.post(f"{base}/v1/judge/group", json=body)
    elapsed = time.perf_counter() - start
    response.raise_for_status()
    return elapsed, response.json()


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=6)
    parser.add_argument("--venv", type=Path, default=DEFAULT_VENV)
    parser.add_argument("--model-cache", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    model_dir = resolve_model_dir(None, args.model_cache)
    times: dict[str, list[float]] = {"batched": [], "naive": []}
    stamps: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        with (
            vllm_server(args.venv, model_dir, work) as v,
            judge_server(v, work, "batched", "vllm") as batched,
            judge_server(v, work, "naive", "openai") as naive,
            httpx.Client(timeout=900) as client,
        ):
            servers = {"batched": batched, "naive": naive}
            timed(client, batched, group(0))  # warm-up: connections, the template
            timed(client, naive, group(1))
            for rep in range(args.repeat):
                order = ["batched", "naive"] if rep % 2 == 0 else ["naive", "batched"]
                for offset, name in enumerate(order):
                    elapsed, body = timed(client, servers[name], group(10 + 2 * rep + offset))
                    times[name].append(elapsed)
                    stamps[name] = body.get("judge", {})
                    print(json.dumps({"rep": rep, "path": name, "seconds": elapsed}), flush=True)
    summary = {
        "machine": machine(),
        "repeat": args.repeat,
        "median_s": {name: statistics.median(values) for name, values in times.items()},
        "times_s": times,
        "ratio_batched_over_naive": statistics.median(times["batched"])
        / statistics.median(times["naive"]),
        "stamps": stamps,
    }
    print(json.dumps(summary, indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps(summary, indent=1))
    return summary


if __name__ == "__main__":
    main()
