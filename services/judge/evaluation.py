"""Judge agreement with human pairwise votes (MT-Bench human judgments).

For each vote the judge sees the question and the two answers of the judged turn, in both
orders; the report gives agreement with the human vote (counting ties, and on votes where
neither side said tie), forced-choice accuracy on the human non-tie votes (P(a) > 0.5 picks a),
position consistency and the first-slot preference rate, overall and per category, with 95%
Wilson intervals, beside the data's GPT-4 verdicts and a "longer answer wins" baseline on the
same votes. Tune on dev.jsonl only; report on test.jsonl.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from plaudit_wire.judge import JudgeOptions, PairwiseRequest

if TYPE_CHECKING:  # the client-only install samples votes here without the server parts
    from services.judge.service import JudgeService


@dataclass(frozen=True)
class Vote:
    id: str
    category: str
    turn: int
    question: str
    answer_a: str
    answer_b: str
    human: str
    gpt4: str


def load_votes(path: Path) -> list[Vote]:
    """Read a JSONL file of MT-Bench human votes."""
    return parse_votes(load_rows(path))


def load_rows(path: Path) -> list[dict[str, Any]]:
    """The JSON objects of a JSONL file, one per non-empty line."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def parse_votes(rows: Iterable[dict[str, Any]]) -> list[Vote]:
    """MT-Bench human-judgment rows as votes; a malformed row raises ValueError naming it."""
    votes = []
    for number, row in enumerate(rows, start=1):
        try:
            votes.append(_vote(row))
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise ValueError(f"vote {number} is not an MT-Bench human vote ({exc!r})") from None
    return votes


def _vote(row: dict[str, Any]) -> Vote:
    conv_a, conv_b = row["conversation_a"], row["conversation_b"]
    turn = int(row["turn"])
    if turn == 1:
        question = conv_a[0]["content"]
    else:
        # The second turn: the judge sees both user turns and judges the second answers.
        question = f"{conv_a[0]['content']}\n\nFollow-up question: {conv_a[2]['content']}"
    index = 2 * turn - 1
    return Vote(
        id=row["id"],
        category=row["category"],
        turn=turn,
        question=question,
        answer_a=conv_a[index]["content"],
        answer_b=conv_b[index]["content"],
        human=row["human_winner"],
        gpt4=row["gpt4_winner"],
    )


def stratified_sample(
    votes: Sequence[Vote], limit: int | None, seed: int, *, non_tie_only: bool = False
) -> list[Vote]:
    """A fixed sample, proportional by category (largest remainders), drawn with ``seed``."""
    pool = [v for v in votes if v.human != "tie"] if non_tie_only else list(votes)
    if limit is None or limit >= len(pool):
        return sorted(pool, key=lambda v: v.id)
    rng = random.Random(seed)
    by_cat: dict[str, list[Vote]] = defaultdict(list)
    for v in sorted(pool, key=lambda v: v.id):
        by_cat[v.category].append(v)
    quotas = {c: limit * len(vs) / len(pool) for c, vs in by_cat.items()}
    counts = {c: int(q) for c, q in quotas.items()}
    for c in sorted(quotas, key=lambda c: quotas[c] - counts[c], reverse=True)[
        : limit - sum(counts.values())
    ]:
        counts[c] += 1
    sample = []
    for c in sorted(by_cat):
        sample.extend(rng.sample(by_cat[c], counts[c]))
    return sorted(sample, key=lambda v: v.id)


def truncate(text: str, max_chars: int) -> str:
    """Cut an answer for the CPU budget, saying so in the text."""
    return text if len(text) <= max_chars else text[:max_chars] + "\n[... answer truncated]"


@dataclass
class VoteOutcome:
    vote: Vote
    p_a: float | None
    winner: str | None
    consistent: bool | None
    p_first: list[float | None] = field(default_factory=list)
    status: str = "ok"
    sources: list[str] = field(default_factory=list)
    """Each order's status and verdict source, as ``status/source`` (``ok/structured``)."""


#: Called with the outcomes so far after each batch of votes.
Judged = Callable[[Sequence[VoteOutcome]], Awaitable[None]]


def outcome_json(outcome: VoteOutcome) -> list[Any]:
    """An outcome as JSON (a job's checkpoint), the vote named by its id."""
    o = outcome
    return [o.vote.id, o.p_a, o.winner, o.consistent, o.p_first, o.status, o.sources]


def outcome_of(value: list[Any], vote: Vote) -> VoteOutcome:
    """The outcome :func:`outcome_json` wrote for ``vote``; ValueError if it names another."""
    vote_id, p_a, winner, consistent, p_first, status, sources = value
    if vote_id != vote.id:
        raise ValueError(f"the outcome of vote {vote_id!r} is not one of vote {vote.id!r}")
    return VoteOutcome(vote, p_a, winner, consistent, list(p_first), status, list(sources))


async def judge_votes(
    service: JudgeService,
    votes: Sequence[Vote],
    options: JudgeOptions,
    *,
    max_chars: int,
    batch: int = 8,
    progress: Callable[[int], Awaitable[None]] | None = None,
    judged: Judged | None = None,
) -> list[VoteOutcome]:
    """Judge every vote (both orders when ``options.swap``), ``batch`` votes at a time;
    ``judged`` gets the outcomes so far after each batch (a job's checkpoint)."""
    outcomes: list[VoteOutcome] = []
    for start in range(0, len(votes), batch):
        chunk = votes[start : start + batch]
        outcomes.extend(
            await asyncio.gather(*(_judge_one(service, v, options, max_chars) for v in chunk))
        )
        await _after_batch(outcomes, len(chunk), progress, judged)
    return outcomes


async def _after_batch(
    outcomes: list[VoteOutcome],
    size: int,
    progress: Callable[[int], Awaitable[None]] | None,
    judged: Judged | None,
) -> None:
    if judged is not None:  # before the progress report, which may raise JobCancelled
        await judged(outcomes)
    if progress is not None:
        await progress(size)


async def grade_votes(
    service: JudgeService,
    votes: Sequence[Vote],
    *,
    k: int,
    max_chars: int,
    batch: int = 8,
    progress: Callable[[int], Awaitable[None]] | None = None,
    judged: Judged | None = None,
) -> list[VoteOutcome]:
    """The pointwise alternative: grade each answer alone on 1..K, the higher expected grade
    wins. No slot, so no position bias; P(a better) is a logistic of the grade difference."""
    outcomes: list[VoteOutcome] = []
    for start in range(0, len(votes), batch):
        chunk = votes[start : start + batch]
        outcomes.extend(
            await asyncio.gather(*(_grade_one(service, v, k, max_chars) for v in chunk))
        )
        await _after_batch(outcomes, len(chunk), progress, judged)
    return outcomes


async def _grade_one(service: JudgeService, vote: Vote, k: int, max_chars: int) -> VoteOutcome:
    texts = [truncate(vote.answer_a, max_chars), truncate(vote.answer_b, max_chars)]
    try:
        grades = await service.grade(vote.question, texts, k=k)
    except Exception as exc:
        return VoteOutcome(vote, None, None, None, [], f"error: {exc}")
    grade_a, grade_b = grades.expected()
    if grade_a is None or grade_b is None:
        return VoteOutcome(vote, None, None, None, [], "error")
    diff = grade_a - grade_b
    p_a = 1 / (1 + math.exp(-diff))
    winner = "tie" if diff == 0 else ("a" if diff > 0 else "b")
    return VoteOutcome(vote, p_a, winner, None, [], "ok")


async def _judge_one(
    service: JudgeService, vote: Vote, options: JudgeOptions, max_chars: int
) -> VoteOutcome:
    request = PairwiseRequest(
        prompt=vote.question,
        response_a=truncate(vote.answer_a, max_chars),
        response_b=truncate(vote.answer_b, max_chars),
        **options.model_dump(),
    )
    try:
        result = await service.pairwise(request)
    except Exception as exc:  # a failed vote is reported, not dropped silently
        return VoteOutcome(vote, None, None, None, [], f"error: {exc}")
    return VoteOutcome(
        vote,
        result.p_a,
        result.winner,
        result.consistent,
        [o.p_first for o in result.orders],
        result.status,
        [f"{o.status}/{o.verdict_source}" for o in result.orders],
    )


def wilson(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval for a proportion."""
    if n == 0:
        return (0.0, 0.0)
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def _rate(hits: Iterable[bool]) -> dict[str, Any]:
    values = list(hits)
    k, n = sum(values), len(values)
    low, high = wilson(k, n)
    return {"rate": k / n if n else None, "n": n, "ci95": [low, high]}


def summarize(outcomes: Sequence[VoteOutcome]) -> dict[str, Any]:
    """Agreement, consistency and position figures for one group of outcomes."""
    judged = [o for o in outcomes if o.winner is not None]
    non_tie_h = [o for o in judged if o.vote.human != "tie"]
    both_non_tie = [o for o in non_tie_h if o.winner != "tie"]
    firsts = [p for o in judged for p in o.p_first if p is not None]
    return {
        "votes": len(outcomes),
        "failed": len(outcomes) - len(judged),
        "agreement_with_ties": _rate(o.winner == o.vote.human for o in judged),
        "agreement_without_ties": _rate(o.winner == o.vote.human for o in both_non_tie),
        "forced_choice_on_human_non_ties": _rate(
            (o.p_a or 0.5) > 0.5 if o.vote.human == "a" else (o.p_a or 0.5) < 0.5 for o in non_tie_h
        ),
        "judge_tie_rate": _rate(o.winner == "tie" for o in judged),
        "position_consistency": _rate(o.consistent for o in judged if o.consistent is not None),
        "first_slot_preference": _rate(p > 0.5 for p in firsts if p != 0.5),
        "orders_by_source": dict(Counter(s for o in outcomes for s in o.sources)),
    }


def references(votes: Sequence[Vote]) -> dict[str, Any]:
    """GPT-4's verdicts (inconsistent = tie) and 'the longer answer wins', on the same votes."""
    non_tie = [v for v in votes if v.human != "tie"]

    def gpt4(v: Vote) -> str:
        return "tie" if v.gpt4 == "inconsistent" else v.gpt4

    def longer(v: Vote) -> str:
        return "a" if len(v.answer_a) > len(v.answer_b) else "b"

    return {
        "gpt4": {
            "agreement_with_ties": _rate(gpt4(v) == v.human for v in votes),
            "agreement_without_ties": _rate(
                gpt4(v) == v.human for v in non_tie if gpt4(v) != "tie"
            ),
        },
        "longer_answer": {
            "agreement_on_human_non_ties": _rate(longer(v) == v.human for v in non_tie)
        },
    }


def report(outcomes: Sequence[VoteOutcome], config: dict[str, Any]) -> dict[str, Any]:
    """The full JSON report: overall, per category, and the reference rows."""
    by_cat: dict[str, list[VoteOutcome]] = defaultdict(list)
    for o in outcomes:
        by_cat[o.vote.category].append(o)
    return {
        "config": config,
        "overall": summarize(outcomes),
        "per_category": {c: summarize(os) for c, os in sorted(by_cat.items())},
        "references": references([o.vote for o in outcomes]),
        "single_order": summarize([_first_order_only(o) for o in outcomes]),
    }


def _first_order_only(o: VoteOutcome) -> VoteOutcome:
    """What the judge would have said without the swap (the "ab" order alone)."""
    p = o.p_first[0] if o.p_first else None
    if p is None:
        return VoteOutcome(o.vote, None, None, None, [], o.status)
    winner = "tie" if p == 0.5 else ("a" if p > 0.5 else "b")
    return VoteOutcome(o.vote, p, winner, None, [p], o.status)


def table(rep: dict[str, Any]) -> str:
    """A plain-text table of the report for the terminal."""

    def pct(x: dict[str, Any]) -> str:
        if x["rate"] is None:
            return "   n/a"
        lo, hi = x["ci95"]
        return f"{100 * x['rate']:5.1f}% [{100 * lo:4.1f}-{100 * hi:4.1f}] n={x['n']}"

    rows = [("overall (swap)", rep["overall"]), ("single order", rep["single_order"])]
    rows += [(c, s) for c, s in rep["per_category"].items()]
    lines = [
        f"{'':16} {'agree w/ ties':30} {'agree w/o ties':30} {'forced choice':30} "
        f"{'consistency':30} {'first slot':30}"
    ]
    for name, s in rows:
        lines.append(
            f"{name:16} {pct(s['agreement_with_ties']):30} {pct(s['agreement_without_ties']):30} "
            f"{pct(s['forced_choice_on_human_non_ties']):30} {pct(s['position_consistency']):30} "
            f"{pct(s['first_slot_preference']):30}"
        )
    refs = rep["references"]
    lines.append(
        f"{'GPT-4 (data)':16} {pct(refs['gpt4']['agreement_with_ties']):30} "
        f"{pct(refs['gpt4']['agreement_without_ties']):30}"
    )
    lines.append(
        f"{'longer answer':16} {'':30} {'':30} "
        f"{pct(refs['longer_answer']['agreement_on_human_non_ties']):30}"
    )
    return "\n".join(lines)
