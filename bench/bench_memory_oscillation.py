"""Oscillation on a replayed run (issue 12): how many rubric edits undo an earlier edit within
5 revisions, with the memory's retrieval (and its undo guard) on vs off.

The replayed run is a fixed sequence of scored steps, ingested through
``POST /v1/memory/runs/{run}/steps/{step}`` (so no trainer and no scoring is needed): 4 groups
of 4 completions per step, per-criterion verdicts drawn (seeded) from a schedule in which c2
("Mentions ...") climbs to saturation, c3 swings between 97% and 10% from step to step (the
batch-only trap: each batch alone says "make it harder", then "make it easier"), the anchor c1
stays high and the pitfall c4 steady. A revision runs after every step (``revise_every=1``),
one at a time, each seeing the rubric the previous one left.

Editors:
* ``greedy``: a transparent rule editor standing in for a batch-driven LLM (the embedded 135M
  model cannot follow the task): it makes each saturated criterion harder (appends a clause)
  and each criterion passed by under 30% easier (drops the clause); it skips a criterion that
  the retrieved history shows it reworded in the last steps (only when retrieval gives it
  history).
* ``smollm2``: the embedded SmolLM2-135M-Instruct as analyst and editor, as served.

Conditions: ``off`` (no retrieval, no undo guard), ``retrieval`` (history, no guard), ``on``
(history and the guard). An edit *undoes* an earlier one when it removes what a revision
added, re-adds what one removed, rewords back to an earlier text or moves a weight back
(:func:`services.memory.operations.find_undo`), against the applied edits of the previous 5
revisions. Counted: proposed undos (edits the checks accepted) and applied undos.

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python -m bench.bench_memory_oscillation \\
        --editors greedy,smollm2 --out memory_oscillation.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from bench.common import machine
from judges.backends.base import GenerateRequest, GenerateResult
from plaudit_wire.rubrics import Criterion
from services.app import create_app
from services.core.models.embedder import load_embedder
from services.memory.operations import EditOperation, PastOperation, find_undo
from services.memory.retrieval import cosine
from services.memory.service import MemoryService
from services.rubrics import aggregate
from services.settings import Settings

CRITERIA: list[dict[str, Any]] = [
    {"text": "Names the place that is described", "weight": 2, "anchor": True},
    {"text": "Mentions at least one sound of the place", "weight": 1},
    {"text": "Describes the light at some time of day", "weight": 1},
    {"text": "Repeats the same word many times", "weight": 1, "kind": "pitfall"},
]
RUBRIC = {"name": "replay", "question": "Describe a place you know well.", "criteria": CRITERIA}
HARDER = ", with a specific detail"
WORDS = ["river", "stone", "cloud", "garden", "market", "bridge", "harbor", "meadow", "lantern"]


def schedule(step: int) -> dict[str, float]:
    """Pass rates of the replayed run at ``step`` (1-based)."""
    return {
        "c1": 0.9,
        "c2": min(1.0, 0.4 + 0.15 * step),
        "c3": 0.97 if step % 2 else 0.1,
        "c4": 0.7,
    }


def replay_step(step: int, rng: random.Random) -> dict[str, Any]:
    criteria = [
        Criterion.model_validate({"id": f"c{i + 1}", "anchor": False, "kind": "required", **c})
        for i, c in enumerate(CRITERIA)
    ]
    rates = schedule(step)
    groups = []
    for _ in range(4):
        texts, rewards, verdicts = [], [], []
        for _ in range(4):
            passes = {c.id: rng.random() < rates[c.id] for c in criteria}
            # Hard verdicts, as generate mode gives them: P(met) 1 or 0.
            p_met = {c.id: float(passes[c.id] == (c.kind == "required")) for c in criteria}
            weights = [c.weight for c in criteria]
            rewards.append(
                aggregate.signed_reward(
                    criteria, weights, [p_met[c.id] for c in criteria], "required_weights"
                )
            )
            verdicts.append(p_met)
            texts.append(" ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 30))))
        groups.append(
            {
                "prompt": RUBRIC["question"],
                "completions": texts,
                "rewards": rewards,
                "verdicts": verdicts,
            }
        )
    return {"groups": groups}


class GreedyEditor:
    """The rule editor described in the module docstring (a GenerateFn)."""

    async def __call__(self, requests: Sequence[GenerateRequest]) -> list[GenerateResult]:
        return [GenerateResult("ok", self._answer(r)) for r in requests]

    def _answer(self, request: GenerateRequest) -> str:
        if "operations" not in (request.json_schema or {}).get("properties", {}):
            return json.dumps({"went_right": "-", "went_wrong": "-", "hacking": False})
        text = request.messages[-1]["content"]
        rubric, _, rest = text.partition("\n\nThis step:\n")
        summary, _, history = rest.partition("\n\nHistory from the memory:\n")
        criteria = dict(
            re.findall(r"^(c\d+) \((?:required|pitfall), weight [^,)]*\): (.*)$", rubric, re.M)
        )
        anchors = set(re.findall(r"^(c\d+) \([^)]*ANCHOR\)", rubric, re.M))
        recent = set(re.findall(r"reword (c\d+)", history))
        saturated = re.findall(
            r"(c\d+) '", summary.partition("saturated: ")[2].partition(" (make")[0]
        )
        failing = [
            cid
            for cid, pct in re.findall(r"(c\d+) '[^']*' passed (\d+)%", summary)
            if int(pct) < 30
        ]
        ops = []
        for cid in saturated:
            if (
                cid in criteria
                and cid not in anchors
                and cid not in recent
                and not criteria[cid].endswith(HARDER)
            ):
                ops.append({"op": "reword", "id": cid, "text": criteria[cid] + HARDER, "weight": 0})
        for cid in failing:
            if (
                cid in criteria
                and cid not in anchors
                and cid not in recent
                and criteria[cid].endswith(HARDER)
            ):
                ops.append(
                    {"op": "reword", "id": cid, "text": criteria[cid][: -len(HARDER)], "weight": 0}
                )
        return json.dumps(
            {"operations": ops[:3], "rationale": "greedy: saturated harder, failing easier"}
        )


async def run_condition(
    editor: str, condition: str, args: argparse.Namespace, judge: Any, embedder: Any
) -> dict[str, Any]:
    data = Path(tempfile.mkdtemp(prefix="plaudit-osc-"))
    settings = Settings(
        data_dir=data,
        _env_file=None,
        memory_revise_every=1,
        memory_retrieval=condition != "off",
        memory_undo_window=5 if condition == "on" else 0,
        memory_max_flip_rate=args.max_flip_rate if condition == "on" else 1.0,
        memory_analyses_per_step=0 if editor == "greedy" else 1,
    )
    extras = {"memory_llm": GreedyEditor()} if editor == "greedy" else {}
    app = create_app(settings, embedder=embedder, judge_backend=judge, **extras)
    steps = args.steps if editor == "greedy" else args.llm_steps
    began = time.perf_counter()
    async with app.router.lifespan_context(app):
        memory: MemoryService = app.state.resources.services.require(MemoryService)
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://b"
        ) as api:
            rubric_id = (await api.post("/v1/rubrics", json=RUBRIC)).json()["id"]
            rng = random.Random(args.seed)
            run = f"replay-{editor}-{condition}"
            for step in range(1, steps + 1):
                body = {"rubric_id": rubric_id, "close": True, **replay_step(step, rng)}
                answer = await api.post(f"/v1/memory/runs/{run}/steps/{step}", json=body)
                assert answer.status_code == 202, answer.text
                await settle(memory, api, run)
            revisions = (
                await api.get(f"/v1/memory/runs/{run}/revisions", params={"limit": 1000})
            ).json()["items"]
            texts = [
                t
                for r in revisions
                for o in r["operations"]
                for t in (o.get("text"), (o.get("before") or {}).get("text"))
                if t
            ]
            table = (
                dict(zip(texts, [list(map(float, v)) for v in embedder.embed(texts)], strict=True))
                if texts
                else {}
            )
    result = count_undos(list(reversed(revisions)), table)
    result.update(
        editor=editor,
        condition=condition,
        steps=steps,
        seconds=round(time.perf_counter() - began, 1),
    )
    print(json.dumps(result), flush=True)
    return result


async def settle(memory: MemoryService, api: httpx.AsyncClient, run: str) -> None:
    await memory.drained()
    while True:
        response = await api.get(f"/v1/memory/runs/{run}/revisions")
        items = response.json()["items"] if response.status_code == 200 else []
        if all(i["state"] not in ("queued", "running") for i in items):
            return
        await asyncio.sleep(0.5)


def count_undos(revisions: list[dict[str, Any]], table: dict[str, list[float]]) -> dict[str, Any]:
    """Proposed and applied undos against the applied edits of the previous 5 revisions."""

    def similar(a: str, b: str) -> float:
        return cosine(table[a], table[b]) if a in table and b in table else 0.0

    states: dict[str, int] = {}
    proposed = applied = edits = 0
    window: list[list[PastOperation]] = []
    for rev in revisions:
        states[rev["state"]] = states.get(rev["state"], 0) + 1
        past = [p for ops in window[-5:] for p in ops]
        accepted = [o for o in rev["operations"] if o.get("accepted")]
        mine: list[PastOperation] = []
        for o in accepted:
            op = EditOperation(
                op=o["op"],
                id=o.get("id") or "",
                text=o.get("text") or "",
                weight=o.get("weight") or 0.0,
            )
            undo = find_undo(op, past, similar, 0.9) is not None
            proposed += undo
            if rev["state"] == "applied":
                edits += 1
                applied += undo
                mine.append(
                    PastOperation(
                        rev["id"],
                        o["op"],
                        o.get("made_id") or o.get("id") or "",
                        op.text,
                        op.weight,
                        o.get("before") or {},
                    )
                )
        window.append(mine)
    return {
        "held_reasons": [r["reason"] for r in revisions if r["state"] == "held"],
        "revisions": len(revisions),
        "states": states,
        "applied_edits": edits,
        "proposed_undos": proposed,
        "applied_undos": applied,
    }


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    from judges.backends.local import LocalBackend

    cache = Path.home() / ".cache" / "plaudit-test" / "models"
    judge = LocalBackend(cache_dir=cache, max_batch_size=8)
    await judge.start()
    embedder = load_embedder("bundled")
    results = []
    try:
        for editor in args.editors.split(","):
            for condition in args.conditions.split(","):
                results.append(await run_condition(editor, condition, args, judge, embedder))
    finally:
        await judge.aclose()
    return {"machine": machine(), "args": vars(args), "results": results}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--editors", default="greedy,smollm2")
    parser.add_argument("--conditions", default="off,retrieval,on")
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--llm-steps", type=int, default=8)
    parser.add_argument("--max-flip-rate", type=float, default=0.34)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    report = asyncio.run(main_async(args))
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
