"""How often generate mode yields a verdict, and where it comes from, on MT-Bench votes.

Judges a stratified sample of votes in both orders through the judge service (settings pick
the backend; the embedded SmolLM2 by default) and counts every order by status and
``verdict_source``: ``parsed`` (a ``Verdict: [[X]]`` line), ``scored`` (letter scored after
the reply), ``structured`` (a schema-valid JSON reply), or none (``unparseable`` / failed).

Run: .venv/bin/python -m bench.verdict_rate \
     --data ~/.local/share/plaudit/datasets/mtbench_human/dev.jsonl \
     --limit 32 --max-new-tokens 48 --verdict-fallback none [--template pairwise_generate@1]
     [--skip N: resume after the sample's first N votes]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import time
from pathlib import Path
from typing import Any

from plaudit_wire.judge import PairwiseRequest
from services.core.cache import MemoryCache
from services.core.models.cached_judge import CachedJudge
from services.core.models.layer import model_backend
from services.judge import evaluation as ev
from services.judge.service import JudgeService
from services.judge.settings import JudgeSettings
from services.settings import get_settings


async def _count(args: argparse.Namespace) -> dict[str, Any]:
    settings = get_settings()
    votes = ev.stratified_sample(ev.load_votes(args.data), args.limit, args.seed, non_tie_only=True)
    votes = votes[args.skip :]  # resume a run that stopped part-way (the sample is in id order)
    backend = model_backend(settings, "judge", JudgeSettings.of(settings))
    start = getattr(backend, "start", None)
    if start is not None:
        await start()
    service = JudgeService(JudgeSettings.of(settings), CachedJudge(backend, MemoryCache()), None)
    counts: collections.Counter[str] = collections.Counter()
    started = time.monotonic()
    extra = {"template": args.template} if args.template else {}
    try:
        for begin in range(0, len(votes), args.batch):
            chunk = votes[begin : begin + args.batch]
            requests = [
                PairwiseRequest(
                    prompt=v.question,
                    response_a=ev.truncate(v.answer_a, args.max_chars),
                    response_b=ev.truncate(v.answer_b, args.max_chars),
                    mode="generate",
                    max_new_tokens=args.max_new_tokens,
                    verdict_fallback=args.verdict_fallback,
                    **extra,
                )
                for v in chunk
            ]
            answers = await asyncio.gather(
                *(service.pairwise(r) for r in requests), return_exceptions=True
            )
            for answer in answers:
                if isinstance(answer, BaseException):
                    counts["failed request (x2 orders)"] += 2
                    continue
                for order in answer.orders:
                    counts[f"{order.status}/{order.verdict_source}"] += 1
            print(f"{begin + len(chunk)}/{len(votes)} votes: {dict(counts)}", flush=True)
    finally:
        close = getattr(backend, "aclose", None)
        if close is not None:
            await close()
    total = sum(counts.values())
    with_verdict = sum(n for key, n in counts.items() if key.startswith("ok/"))
    return {
        "data": str(args.data),
        "votes": len(votes),
        "orders": total,
        "counts": dict(counts),
        "orders_with_verdict": with_verdict,
        "verdict_rate": with_verdict / total if total else None,
        "seconds": round(time.monotonic() - started, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--limit", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-chars", type=int, default=1000)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--verdict-fallback", choices=("score", "none"), default="none")
    parser.add_argument("--template", default=None)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--skip", type=int, default=0, help="leave out the sample's first votes")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    result = asyncio.run(_count(args))
    print(json.dumps(result, indent=2))
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
