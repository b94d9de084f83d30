"""Listwise group judge vs pairwise tournament on MT-Bench human votes (issue 19).

MT-Bench's human votes compare two of six models' answers to one question (one turn). Every
(question, turn) is one group: the answers of all the models the votes mention. Each group is
judged twice by the same judge: listwise (``JudgeService.listwise``: one call, a score per
answer) and as a round-robin pairwise tournament in both orders (``JudgeService.group``,
logprob mode, Bradley-Terry strengths). Each human non-tie vote is then predicted by which of
its two answers got the higher reward (equal rewards or a missing one: a predicted tie, which
counts as a disagreement). Cost per group: backend calls (prompts) and tokens (prompt tokens
counted with the judge's tokenizer and chat template; generated tokens as reported).

Tune on dev.jsonl, report on test.jsonl (the data's README)::

    OMP_NUM_THREADS=1 PLAUDIT_JUDGE_FENCE_SECRET=bench-listwise \\
    PLAUDIT_MODEL_CACHE_DIR=~/.cache/plaudit-test/models PLAUDIT_JUDGE_TIMEOUT_S=3000 \\
    python -m bench.bench_listwise --split test --groups 8

A fixed ``PLAUDIT_JUDGE_FENCE_SECRET`` keeps the prompts (their fence codes) the same from run
to run; with a random one the 135M judge's verdicts change between runs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.common import machine
from judges.backends.base import ChoiceRequest, ChoiceResult, GenerateRequest, GenerateResult
from plaudit_wire.judge import GroupRequest, ListwiseRequest
from plaudit_wire.schemas import CompletionItem
from services.core.cache import MemoryCache
from services.core.errors import BackendUnavailable
from services.core.models.cached_judge import CachedJudge
from services.core.models.layer import model_backend
from services.datasets.store import locate
from services.judge.evaluation import load_rows, truncate, wilson
from services.judge.service import JudgeService
from services.judge.settings import JudgeSettings
from services.settings import get_settings


@dataclass
class Group:
    key: str
    category: str
    question: str
    answers: dict[str, str]  # model -> answer text
    votes: list[tuple[str, str, str]] = field(default_factory=list)  # model_a, model_b, winner


def load_groups(split: str) -> list[Group]:
    """The (question, turn) groups of a split, with their human votes."""
    groups: dict[str, Group] = {}
    for row in load_rows(locate(get_settings(), "mtbench_human") / f"{split}.jsonl"):
        turn = int(row["turn"])
        key = f"{row['question_id']}-t{turn}"
        conv = row["conversation_a"]
        question = conv[0]["content"]
        if turn == 2:
            question = f"{question}\n\nFollow-up question: {conv[2]['content']}"
        group = groups.setdefault(key, Group(key, row["category"], question, {}))
        for side in ("a", "b"):
            group.answers[row[f"model_{side}"]] = row[f"conversation_{side}"][2 * turn - 1][
                "content"
            ]
        group.votes.append((row["model_a"], row["model_b"], row["human_winner"]))
    return sorted(groups.values(), key=lambda g: g.key)


class CountingBackend:
    """The judge's backend, counting the prompts it is sent and their tokens."""

    def __init__(self, inner: Any, tokenizer: Any) -> None:
        self.inner = inner
        self.tokenizer = tokenizer
        self.calls = 0
        self.prompt_tokens = 0
        self.generated_tokens = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _count(self, requests: Sequence[ChoiceRequest | GenerateRequest]) -> None:
        for request in requests:
            ids = self.tokenizer.apply_chat_template(
                list(request.messages), tokenize=True, add_generation_prompt=True
            )
            self.calls += 1
            self.prompt_tokens += len(ids if isinstance(ids, list) else ids["input_ids"])

    async def score_choices(self, requests: Sequence[ChoiceRequest]) -> list[ChoiceResult]:
        self._count(requests)
        results: list[ChoiceResult] = await self.inner.score_choices(requests)
        return results

    async def generate(self, requests: Sequence[GenerateRequest]) -> list[GenerateResult]:
        self._count(requests)
        results: list[GenerateResult] = await self.inner.generate(requests)
        self.generated_tokens += sum(s.num_tokens for r in results for s in r.all_samples())
        return results

    def snapshot(self) -> tuple[int, int, int]:
        return self.calls, self.prompt_tokens, self.generated_tokens


def agreement(
    groups: Sequence[Group], rewards: dict[str, dict[str, float | None]]
) -> dict[str, Any]:
    """Agreement with the human non-tie votes: the higher reward names the winner."""
    hits = total = ties = 0
    for group in groups:
        scored = rewards.get(group.key, {})
        for model_a, model_b, winner in group.votes:
            if winner == "tie":
                continue
            total += 1
            ra, rb = scored.get(model_a), scored.get(model_b)
            if ra is None or rb is None or ra == rb:
                ties += 1
                continue
            hits += (ra > rb) == (winner == "a")
    low, high = wilson(hits, total)
    return {
        "votes": total,
        "agreement": round(hits / total, 3) if total else None,
        "ci95": [round(low, 3), round(high, 3)],
        "predicted_ties": ties,
    }


async def judge_group(
    service: JudgeService, counter: CountingBackend, group: Group, args: argparse.Namespace
) -> dict[str, Any]:
    models = sorted(group.answers)
    completions = [
        CompletionItem(id=m, text=truncate(group.answers[m], args.max_chars)) for m in models
    ]
    out: dict[str, Any] = {"key": group.key, "g": len(models)}
    before, started = counter.snapshot(), time.perf_counter()
    request = ListwiseRequest(
        prompt=group.question,
        completions=completions,
        cache=False,
        max_new_tokens=args.max_new_tokens,
    )
    try:
        listwise = await service.listwise(request)
        rewards = {r.id: r.reward for r in listwise.results}
        statuses, calls = [str(r.status) for r in listwise.results], listwise.calls
    except BackendUnavailable as exc:  # every call failed (a timeout on a busy machine)
        rewards, statuses, calls = {}, [f"unavailable: {exc}"] * len(models), 1
    out["listwise"] = _cost(counter, before, started)
    out["listwise"].update(rewards=rewards, statuses=statuses, judge_calls=calls)
    before, started = counter.snapshot(), time.perf_counter()
    tournament = await service.group(
        GroupRequest(
            prompt=group.question,
            completions=completions,
            pairing="round_robin",
            scoring="bradley_terry",
            cache=False,
        )
    )
    out["pairwise"] = _cost(counter, before, started)
    out["pairwise"]["rewards"] = {r.id: r.reward for r in tournament.results}
    return out


def _cost(counter: CountingBackend, before: tuple[int, int, int], started: float) -> dict[str, Any]:
    calls, prompt, generated = (a - b for a, b in zip(counter.snapshot(), before, strict=True))
    return {
        "calls": calls,
        "prompt_tokens": prompt,
        "generated_tokens": generated,
        "seconds": round(time.perf_counter() - started, 2),
    }


def summarize(groups: Sequence[Group], judged: list[dict[str, Any]]) -> dict[str, Any]:
    report: dict[str, Any] = {}
    for method in ("listwise", "pairwise"):
        rows = [j[method] for j in judged]
        rewards = {j["key"]: j[method]["rewards"] for j in judged}
        summary = agreement(groups, rewards)
        for name in ("calls", "prompt_tokens", "generated_tokens", "seconds"):
            summary[f"{name}_per_group"] = round(statistics.mean(r[name] for r in rows), 1)
        report[method] = summary
    statuses = [s for j in judged for s in j["listwise"]["statuses"]]
    report["listwise"]["ok_rate"] = round(statuses.count("ok") / len(statuses), 3)
    report["listwise"]["retried_groups"] = sum(j["listwise"]["judge_calls"] > 1 for j in judged)
    return report


async def main(args: argparse.Namespace) -> dict[str, Any]:
    from transformers import AutoTokenizer

    from judges.backends.convert import resolve_model_dir

    groups = load_groups(args.split)
    picked = sorted(
        random.Random(args.seed).sample(groups, min(args.groups, len(groups))), key=lambda g: g.key
    )
    settings = get_settings()
    backend = model_backend(settings, "judge", JudgeSettings.of(settings))
    await backend.start()
    tokenizer = AutoTokenizer.from_pretrained(
        resolve_model_dir(JudgeSettings.of(settings).model, settings.models_dir)
    )
    counter = CountingBackend(backend, tokenizer)
    service = JudgeService(JudgeSettings.of(settings), CachedJudge(counter, MemoryCache()), None)
    judged = []
    try:
        for number, group in enumerate(picked, start=1):
            judged.append(await judge_group(service, counter, group, args))
            print(f"{number}/{len(picked)} {group.key}", flush=True)
            print(json.dumps(summarize(picked[:number], judged)), flush=True)  # so far
    finally:
        await backend.aclose()
    by_category: dict[str, int] = defaultdict(int)
    for group in picked:
        by_category[group.category] += 1
    return {
        "config": {**vars(args), "judge": backend.info.model_id, "machine": machine()},
        "categories": dict(by_category),
        "report": summarize(picked, judged),
        "groups": judged,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--split", default="dev", choices=["dev", "test"])
    parser.add_argument("--groups", type=int, default=10, help="(question, turn) groups sampled")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-chars", type=int, default=300, help="each answer cut to this")
    parser.add_argument(
        "--max-new-tokens", type=int, default=None, help="listwise reply budget (default: auto)"
    )
    parser.add_argument("--out", default=None, help="write the full JSON here")
    result = asyncio.run(main(parser.parse_args()))
    if result["config"]["out"]:
        with open(result["config"]["out"], "w") as f:
            json.dump(result, f, indent=1)
    print(json.dumps({"config": result["config"], "report": result["report"]}, indent=1))
