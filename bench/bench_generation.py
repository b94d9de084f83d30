"""Constrained vs unconstrained generation on the local backend (issue 8).

The same judge prompts (``pairwise_json@1``, both orders of ``--pairs`` pairs, one batched
call) are generated with the same ``max_new_tokens``, once under the judge's JSON schema
(xgrammar masks every step) and once free. Runs alternate, so machine noise hits both
alike; the figures are medians. A free reply and a constrained one stop at different
lengths (a JSON verdict ends at its closing brace, free text often runs to the budget), so
wall time per call is not the speed to compare. The figure to read is seconds per decoding
step: (call time - prompt time) / (steps - 1), where a step is one token for every row of
the batch, steps are the longest reply's tokens (+1 for its end token), and the prompt
time is a third arm that generates one token for the same prompts.

Run: .venv/bin/python -m bench.bench_generation [--pairs 4] [--max-new-tokens 64] [--repeats 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from pathlib import Path
from typing import Any

import torch

from bench.common import machine
from bench.texts import completions
from judges.backends.base import GenerateRequest
from judges.backends.local import LocalBackend
from judges.templates import load_template
from services.judge.settings import JudgeSettings
from services.judge.structured import verdict_schema
from services.settings import get_settings

QUESTION = "Explain in one or two sentences what the assistant computed."


def _requests(pairs: int, max_new_tokens: int, constrained: bool) -> list[GenerateRequest]:
    template = load_template("pairwise_json@1")
    texts = completions(2 * pairs, seed=3)
    schema = verdict_schema(max_new_tokens) if constrained else None
    out = []
    for i in range(pairs):
        a, b = texts[2 * i], texts[2 * i + 1]
        for first, second in ((a, b), (b, a)):
            prompt = template.render(question=QUESTION, response_a=first, response_b=second)
            out.append(GenerateRequest(prompt.messages, max_new_tokens, json_schema=schema))
    return out


async def _timed(backend: LocalBackend, requests: list[GenerateRequest]) -> tuple[float, int, int]:
    """Seconds, decoding steps (one chunk: the longest row, its end token included), and
    how many replies are JSON."""
    started = time.perf_counter()
    results = await backend.generate(requests)
    seconds = time.perf_counter() - started
    assert all(r.ok for r in results), [r.error for r in results if not r.ok]
    valid = sum(1 for r in results if _is_json(r.text))
    steps = max(r.num_tokens + (r.finish_reason == "stop") for r in results)
    return seconds, steps, valid


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


async def run(args: argparse.Namespace) -> dict[str, Any]:
    settings = get_settings()
    backend = LocalBackend(
        JudgeSettings.of(settings).model,
        cache_dir=settings.models_dir,
        max_batch_size=args.batch,
        num_threads=args.threads,
    )
    await backend.start()
    arms = {
        "constrained": _requests(args.pairs, args.max_new_tokens, True),
        "free": _requests(args.pairs, args.max_new_tokens, False),
        "prompt": _requests(args.pairs, 1, False),
    }
    runs: dict[str, list[tuple[float, int, int]]] = {name: [] for name in arms}
    try:
        for requests in arms.values():  # warm-up: grammar compile, first allocations
            await _timed(backend, requests)
        for _ in range(args.repeats):
            for name, requests in arms.items():
                runs[name].append(await _timed(backend, requests))
    finally:
        await backend.aclose()
    prompt_s = statistics.median(s for s, _, _ in runs["prompt"])
    summary: dict[str, Any] = {"prompt_seconds": prompt_s}
    for name in ("constrained", "free"):
        values = runs[name]
        summary[name] = {
            "seconds_per_call": statistics.median(s for s, _, _ in values),
            "steps_per_call": statistics.median(n for _, n, _ in values),
            "seconds_per_step": statistics.median(
                (s - prompt_s) / max(n - 1, 1) for s, n, _ in values
            ),
            "json_replies": f"{values[-1][2]}/{len(arms[name])}",
            "runs": [round(s, 2) for s, _, _ in values],
        }
    c, f = summary["constrained"], summary["free"]
    summary["ratio_seconds_per_step"] = c["seconds_per_step"] / f["seconds_per_step"]
    summary["ratio_seconds_per_call"] = c["seconds_per_call"] / f["seconds_per_call"]
    summary["config"] = {**vars(args), "machine": machine(), "torch": torch.__version__}
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    summary = asyncio.run(run(args))
    text = json.dumps(summary, indent=2, default=str)
    print(text)
    if args.out is not None:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
