"""The user simulator: a default calibration (time, memory, realism before vs after), then turn
latency, one at a time vs 16 concurrent, uncalibrated and calibrated.

``calibrate`` runs ``plaudit simulator calibrate``'s default in-process (the shared USS data,
the CPU default config) and writes its metrics and the calibration folder; ``turns`` serves the
simulator app in-process (httpx ASGI transport, SQLite in a temp dir) with that calibration
stored as ``uss@1`` and times ``POST /v1/simulator/turn``::

    OMP_NUM_THREADS=2 nice -n 10 python -m bench.bench_simulator calibrate --out /tmp/simcal
    OMP_NUM_THREADS=1 nice -n 10 python -m bench.bench_simulator turns --calibration /tmp/simcal
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.common import machine

GOAL = "You want a cheap Italian restaurant in the centre of town for two people tonight."
DIALOGUE = [
    {"role": "user", "content": "Hi, I need a place to eat tonight."},
    {"role": "assistant", "content": "Sure. What kind of food and which part of town?"},
]
CONCURRENT = 16


def calibrate(out: Path, threads: int | None, overrides: dict[str, Any]) -> dict[str, Any]:
    from judges.backends.convert import resolve_model_dir
    from plaudit_wire.simulator import CalibrationConfig
    from services.core.models.embedder import load_embedder
    from services.settings import Settings
    from services.simulator.calibration import calibrate as run
    from services.simulator.jobs import uss_dir

    settings = Settings()
    base = resolve_model_dir(None, settings.models_dir)
    embedder = load_embedder("bundled")
    config = CalibrationConfig(threads=threads, **overrides)
    last = [""]

    def progress(done: int, total: int, stage: str) -> None:
        if stage != last[0] or done == total:
            print(f"  {stage}: {done}/{total}", flush=True)
            last[0] = stage

    result = run(
        config,
        base_dir=base,
        data_dir=uss_dir(settings),
        roots=[],
        out=out,
        embed=embedder.embed,
        progress=progress,
    )
    (out / "calibration.json").write_text(json.dumps(result.metrics, indent=2))
    return result.metrics


async def turns(calibration: Path | None, repeats: int) -> dict[str, Any]:
    from services.settings import Settings
    from services.simulator.app import create_app
    from services.simulator.service import SimulatorService

    with tempfile.TemporaryDirectory() as root:
        settings = Settings(data_dir=Path(root), simulator_backend="local")
        app = create_app(settings)
        out: dict[str, Any] = {}
        async with app.router.lifespan_context(app):
            service = app.state.resources.services.require(SimulatorService)
            refs: list[str | None] = [None]
            if calibration is not None:
                metrics = json.loads((calibration / "calibration.json").read_text())
                saved = await service.save(
                    calibration, metrics, "uss", owner=None, job_id=None, note="bench"
                )
                refs.append(saved.ref)
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(
                transport=transport, base_url="http://b", timeout=600
            ) as client:

                async def one(ref: str | None, seed: int) -> float:
                    body = {
                        "goal": GOAL,
                        "messages": DIALOGUE,
                        "calibration": ref,
                        "temperature": 0.8,
                        "seed": seed,
                    }
                    start = time.perf_counter()
                    response = await client.post("/v1/simulator/turn", json=body)
                    response.raise_for_status()
                    return time.perf_counter() - start

                samples = {}
                for ref in refs:
                    await one(ref, 0)  # load
                    body = {"goal": GOAL, "messages": DIALOGUE, "calibration": ref, "seed": 7}
                    samples[ref or "uncalibrated"] = (
                        await client.post("/v1/simulator/turn", json=body)
                    ).json()
                    single = [await one(ref, k) for k in range(repeats)]
                    start = time.perf_counter()
                    for k in range(CONCURRENT):
                        await one(ref, 100 + k)
                    sequential = time.perf_counter() - start
                    start = time.perf_counter()
                    await asyncio.gather(*(one(ref, 200 + k) for k in range(CONCURRENT)))
                    concurrent = time.perf_counter() - start
                    out[ref or "uncalibrated"] = {
                        "turn_latency_median_s": round(statistics.median(single), 3),
                        f"{CONCURRENT}_one_at_a_time_s": round(sequential, 2),
                        f"{CONCURRENT}_concurrent_s": round(concurrent, 2),
                        "speedup": round(sequential / concurrent, 2),
                    }
                listing = (await client.get("/v1/simulator/calibrations")).json()
                out["episode"] = await episode(client, service, refs[-1])
        out["samples"] = samples
        out["listing"] = listing
        return out


async def episode(client: httpx.AsyncClient, service: Any, ref: str | None) -> dict[str, Any]:
    """One episode against a real OpenAI-compatible policy: SmolLM2 served by the tests'
    stand-in server (``tests/services/simulator/policy_server.py``) on a loopback port."""
    from tests.services.simulator.policy_server import policy_app, serving

    base = service.base
    await base.start()
    with serving(policy_app(base.model_dir)) as url:
        body = {
            "goal": GOAL,
            "policy": {"base_url": f"{url}/v1", "model": "smollm2", "max_tokens": 48},
            "max_turns": 3,
            "calibration": ref,
            "seed": 11,
        }
        start = time.perf_counter()
        response = await client.post("/v1/simulator/episodes", json=body, timeout=600)
        seconds = time.perf_counter() - start
    return {"seconds": round(seconds, 1), "answer": response.json()}


def heads(train_turns: int, test_turns: int, seed: int = 0) -> dict[str, Any]:
    """Issue 24: the satisfaction predictor and the act model alone (no language model), fitted
    on ``train_turns`` sampled train-split turns and measured on ``test_turns`` sampled
    test-split turns: satisfaction accuracy and macro-F1 beside the majority level for each
    feature set and weighting, and the act model's end and question rates per domain."""
    import random

    import numpy as np

    from services.core.models.embedder import load_embedder
    from services.settings import Settings
    from services.simulator import data as uss
    from services.simulator.acts import Context, context_texts, fit_acts, real_acts
    from services.simulator.acts import features as act_features
    from services.simulator.jobs import uss_dir
    from services.simulator.predictor import features, fit, pair_texts
    from services.simulator.realism import satisfaction_report

    embed = load_embedder("bundled").embed
    dialogues = uss.load(["sgd", "mwoz", "ccpe"], uss_dir(Settings()))
    rng = random.Random(seed)
    train = uss.examples(uss.in_split(dialogues, "train"))
    test = uss.examples(uss.in_split(dialogues, "test"))
    out: dict[str, Any] = {"train_turns": train_turns, "test_turns": test_turns}

    def rated(items: list[Any], n: int) -> list[Any]:
        kept = [i for i in items if i.satisfaction is not None]
        return rng.sample(kept, min(n, len(kept)))

    fit_on, measure_on = rated(train, train_turns), rated(test, test_turns)
    vectors = {}
    for name, items in (("train", fit_on), ("test", measure_on)):
        assistant, reply = pair_texts(items)
        reply = [r or "(empty)" for r in reply]
        vectors[name] = (embed(assistant), embed(reply), (assistant, reply))
    labels = [i.satisfaction for i in fit_on]
    majority = max(set(labels), key=labels.count)
    gold = [i.satisfaction for i in measure_on]
    for feature_set in ("embeddings", "cues"):
        x = features(*vectors["train"], feature_set)
        x_test = features(*vectors["test"], feature_set)
        for balance in (0.0, 0.5, 1.0):
            predictor = fit(x, labels, balance=balance, feature_set=feature_set, seed=seed)
            guess = (predictor.distribution(x_test).argmax(axis=1) + 1).tolist()
            report = satisfaction_report(list(zip(gold, guess, strict=True)), majority)
            out[f"satisfaction {feature_set} balance={balance}"] = report
    act_fit = rng.sample(train, min(train_turns, len(train)))
    act_test = rng.sample(test, min(test_turns, len(test)))
    contexts = [Context.of(i) for i in act_fit]
    model = fit_acts(
        act_features(contexts, embed(context_texts(contexts))),
        [real_acts(i.text, i.is_last) for i in act_fit],
        seed=seed,
    )
    contexts = [Context.of(i) for i in act_test]
    chosen = model.decide(act_features(contexts, embed(context_texts(contexts))), rng)
    for domain in [*sorted({i.domain for i in act_test}), "all"]:
        rows = [k for k, i in enumerate(act_test) if domain in ("all", i.domain)]
        real = [real_acts(act_test[k].text, act_test[k].is_last) for k in rows]
        out[f"acts {domain}"] = {
            "contexts": len(rows),
            "end_real": float(np.mean([a.end for a in real])),
            "end_chosen": float(np.mean([chosen[k].end for k in rows])),
            "end_agreement": float(
                np.mean([chosen[k].end == a.end for k, a in zip(rows, real, strict=True)])
            ),
            "question_real": float(np.mean([a.question for a in real])),
            "question_chosen": float(np.mean([chosen[k].question for k in rows])),
        }
    return out


def table(metrics: dict[str, Any]) -> str:
    """The BENCHMARKS.md table: per domain, before vs after."""
    realism = metrics["realism"]

    def pct(value: float | None) -> str:
        return "n/a" if value is None else f"{100 * value:.1f}%"

    rows = [
        "| domain | classifier acc. before / after | length W1 before / after (words) | "
        "question rate real / before / after | distinct-2 real / before / after | "
        "ends: real / before / after | satisfaction acc. before / after (majority) |",
        "|---|---|---|---|---|---|---|",
    ]
    before, after = realism["before"], realism["after"]
    for domain in [*sorted(after["domains"]), "all"]:
        b = before["all"] if domain == "all" else before["domains"][domain]
        a = after["all"] if domain == "all" else after["domains"][domain]
        rows.append(
            f"| {domain} ({a['turns']}) "
            f"| {pct(b['classifier_accuracy'])} / **{pct(a['classifier_accuracy'])}** "
            f"| {b['length_w1']:.1f} / **{a['length_w1']:.1f}** "
            f"| {pct(a['question_rate']['real'])} / {pct(b['question_rate']['simulated'])} / "
            f"{pct(a['question_rate']['simulated'])} "
            f"| {a['distinct_2']['real']:.2f} / {b['distinct_2']['simulated']:.2f} / "
            f"{a['distinct_2']['simulated']:.2f} "
            f"| {pct(a['end']['real_rate'])} / {pct(b['end']['simulated_rate'])} / "
            f"{pct(a['end']['simulated_rate'])} "
            f"| {pct(b['satisfaction']['accuracy'])} / {pct(a['satisfaction']['accuracy'])} "
            f"({pct(a['satisfaction']['majority_accuracy'])}) |"
        )
    return "\n".join(rows)


def acts_table(metrics: dict[str, Any]) -> str:
    """Issue 24: questions, ends and satisfaction (accuracy and macro-F1), per domain."""
    realism = metrics["realism"]

    def pct(value: float | None) -> str:
        return "n/a" if value is None else f"{100 * value:.1f}%"

    def f1(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.3f}"

    rows = [
        "| domain | question rate real / before / after | ends real / before / after "
        "(agreement after) | satisfaction acc. before / after / majority | macro-F1 before / "
        "after / majority |",
        "|---|---|---|---|---|",
    ]
    before, after = realism.get("before"), realism["after"]
    for domain in [*sorted(after["domains"]), "all"]:
        a = after["all"] if domain == "all" else after["domains"][domain]
        b = (before["all"] if domain == "all" else before["domains"][domain]) if before else None
        bq = pct(b["question_rate"]["simulated"]) if b else "-"
        be = pct(b["end"]["simulated_rate"]) if b else "-"
        bs = b["satisfaction"] if b else {}
        s = a["satisfaction"]
        rows.append(
            f"| {domain} ({a['turns']}) | {pct(a['question_rate']['real'])} / {bq} / "
            f"**{pct(a['question_rate']['simulated'])}** | {pct(a['end']['real_rate'])} / {be} / "
            f"**{pct(a['end']['simulated_rate'])}** ({pct(a['end']['agreement'])}) "
            f"| {pct(bs.get('accuracy'))} / **{pct(s['accuracy'])}** / "
            f"{pct(s['majority_accuracy'])} | {f1(bs.get('macro_f1'))} / **{f1(s['macro_f1'])}** "
            f"/ {f1(s['majority_macro_f1'])} |"
        )
    return "\n".join(rows)


def dialogues_table(metrics: dict[str, Any]) -> str:
    """Issue 24: whole dialogues, real against before and after, per domain."""
    realism = metrics["realism"]

    def num(value: float | None, pct: bool = False) -> str:
        if value is None:
            return "n/a"
        return f"{100 * value:.1f}%" if pct else f"{value:.2f}"

    rows = [
        "| run | domain (dialogues) | user turns real / sim (W1) | ended real / sim | "
        "first-turn distinct-2 real / sim | first-turn similarity real / sim | classifier acc. |",
        "|---|---|---|---|---|---|---|",
    ]
    for run in ("before", "after"):
        report = realism.get(f"dialogues_{run}")
        if report is None:
            continue
        for domain, g in {**report["domains"], "all": report["all"]}.items():
            r, m = g["real"], g["simulated"]
            rows.append(
                f"| {run} | {domain} ({m['dialogues']}) | {num(r['mean_user_turns'])} / "
                f"{num(m['mean_user_turns'])} ({num(g['user_turns_w1'])}) | "
                f"{num(r['ended'], True)} / {num(m['ended'], True)} | "
                f"{num(r['first_distinct_2'])} / {num(m['first_distinct_2'])} | "
                f"{num(r['first_similarity'])} / {num(m['first_similarity'])} | "
                f"{num(g['classifier_accuracy'], True)} |"
            )
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=["calibrate", "turns", "table", "heads"])
    parser.add_argument("--train-turns", type=int, default=3000, help="heads: turns fitted on")
    parser.add_argument("--test-turns", type=int, default=1500, help="heads: turns measured")
    parser.add_argument("--out", type=Path, default=Path("/tmp/plaudit-simcal"))
    parser.add_argument("--calibration", type=Path, default=None)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a calibration option other than the default (a reduced run), e.g. max_steps=20",
    )
    args = parser.parse_args()
    print(f"machine: {machine()}")
    if args.what == "table":
        metrics = json.loads((args.out / "calibration.json").read_text())
        if "before" in metrics["realism"]:
            print(table(metrics), end="\n\n")
        print(acts_table(metrics), end="\n\n")
        print(dialogues_table(metrics))
    elif args.what == "heads":
        print(json.dumps(heads(args.train_turns, args.test_turns), indent=2))
    elif args.what == "calibrate":
        overrides = {k: json.loads(v) for k, v in (item.split("=", 1) for item in args.set)}
        metrics = calibrate(args.out, args.threads, overrides)
        print(json.dumps(metrics, indent=2))
    else:
        print(json.dumps(asyncio.run(turns(args.calibration, args.repeats)), indent=2))


if __name__ == "__main__":
    main()
