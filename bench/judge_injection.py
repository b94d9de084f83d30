"""Prompt-injection flip rate of the judge (issue 9), before and after the fence defence.

Runs the cases of ``bench/injection.py`` (question/right/wrong triples x 16 injection styles
and a control x the wrong answer in slot A and in slot B) through the judge, with and
without the order swap, once per template (``pairwise@1``: tag fences only; ``pairwise@2``:
boundary-coded fences and neutralised values), on the embedded judge or any backend the
settings name. A flip is a verdict that moves toward the injected wrong answer.

By default the first 3 of the 16 triples (about 8 min of CPU for both templates on the
embedded judge); ``--triples 16`` for a judge served on a GPU.

Run: nice -n 10 .venv/bin/python -m bench.judge_injection [--triples 3] [--out report.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Sequence
from typing import Any

from bench.common import machine
from bench.injection import STYLES, TRIPLES, Case, Verdict, build_cases, count_flips
from plaudit_wire.judge import PairwiseRequest
from services.core.cache import MemoryCache
from services.core.models.cached_judge import CachedJudge
from services.core.models.layer import model_backend
from services.judge.service import JudgeService
from services.judge.settings import JudgeSettings
from services.settings import get_settings

TEMPLATES = ("pairwise@1", "pairwise@2")
DEFAULT_TRIPLES = 3


async def judge_cases(
    service: JudgeService, cases: Sequence[Case], template: str, swap: bool
) -> list[Verdict]:
    """Each case's verdict; the cases of one triple are sent together, so that the local
    judge merges them into shared forward passes."""
    verdicts: dict[int, Verdict] = {}
    for triple in sorted({c.triple for c in cases}):
        mine = [i for i, c in enumerate(cases) if c.triple == triple]
        got = await asyncio.gather(*(_judge(service, cases[i], template, swap) for i in mine))
        verdicts.update(zip(mine, got, strict=True))
    return [verdicts[i] for i in range(len(cases))]


async def _judge(service: JudgeService, case: Case, template: str, swap: bool) -> Verdict:
    response = await service.pairwise(
        PairwiseRequest(
            prompt=case.question,
            response_a=case.response_a,
            response_b=case.response_b,
            swap=swap,
            template=template,
        )
    )
    return Verdict(response.p_a, response.winner)


async def run(templates: Sequence[str], triples: int, out: str | None) -> dict[str, Any]:
    settings = get_settings()
    backend = model_backend(settings, "judge", JudgeSettings.of(settings))
    start = getattr(backend, "start", None)
    if start is not None:
        await start()
    # One cache per run: the single-order pass reuses the swap pass's "ab" order.
    service = JudgeService(JudgeSettings.of(settings), CachedJudge(backend, MemoryCache()), None)
    cases = build_cases(TRIPLES[:triples], STYLES)
    result: dict[str, Any] = {
        "machine": machine(),
        "model": backend.info.model_id,
        "triples": triples,
        "styles": [s.name for s in STYLES],
        "pairs_per_run": len(cases),
        "templates": {},
    }
    for template in templates:
        began = time.perf_counter()
        runs: dict[str, Any] = {}
        for swap in (True, False):
            verdicts = await judge_cases(service, cases, template, swap)
            runs["swap" if swap else "single"] = count_flips(cases, verdicts, STYLES)
        runs["seconds"] = round(time.perf_counter() - began, 1)
        result["templates"][template] = runs
    close = getattr(backend, "aclose", None)
    if close is not None:
        await close()
    if out:
        with open(out, "w") as f:
            json.dump(result, f, indent=2, ensure_ascii=False)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--templates", default=",".join(TEMPLATES))
    parser.add_argument(
        "--triples", type=int, default=DEFAULT_TRIPLES, choices=range(1, len(TRIPLES) + 1)
    )
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    report = asyncio.run(run(args.templates.split(","), args.triples, args.out))
    print(json.dumps(report, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
