"""One pair judged in one or both orders: backend results -> P(a better), winner, consistency.

Order "ab" shows response a in the first slot, order "ba" shows b first. The judge's P(first
slot better) in "ba" is P(b better), so P(a better) = mean(p_ab, 1 - p_ba) (PPR-GDE's swap).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from judges.backends.base import ChoiceResult, GenerateResult
from judges.generation import GenerationResult
from judges.parsing import parse_pairwise_verdict
from plaudit_wire.schemas import ItemStatus

Order = Literal["ab", "ba"]
Status = ItemStatus
Source = Literal["logprob", "parsed", "scored", "structured"]
"""Where an order's verdict came from: letter probabilities, a parsed verdict line, the
letter probabilities scored after a reply that had no parseable verdict, or the ``verdict``
field of a reply generated under a JSON schema."""


@dataclass(frozen=True)
class OrderJudgment:
    order: Order
    p_first: float | None
    status: Status
    error: str | None = None
    reply: str | None = None
    source: Source | None = None

    @property
    def verdict(self) -> Literal["first", "second"] | None:
        if self.p_first is None or self.p_first == 0.5:
            return None
        return "first" if self.p_first > 0.5 else "second"


@dataclass(frozen=True)
class PairJudgment:
    orders: tuple[OrderJudgment, ...]
    p_a: float | None
    winner: Literal["a", "b", "tie"] | None
    consistent: bool | None
    status: Status


def from_choice(order: Order, result: ChoiceResult) -> OrderJudgment:
    """P(first slot better) is the probability of the letter "A". A result without
    ``coverage`` is a verdict the backend parsed from a reply because that call had no
    logprobs (the OpenAI backend's fallback), so its source says ``parsed`` (issue 19)."""
    if not result.ok:
        return OrderJudgment(order, None, result.status, result.error)
    source: Source = "parsed" if result.coverage is None else "logprob"
    return OrderJudgment(order, float(result.probs[0]), "ok", source=source)


def from_generation(order: Order, result: GenerateResult) -> OrderJudgment:
    """A parsed verdict letter; an unparseable reply is kept as data, not raised."""
    if not result.ok:
        return OrderJudgment(order, None, result.status, result.error)
    verdict = parse_pairwise_verdict(result.text, labels=("A", "B"))
    if not verdict.ok:
        return OrderJudgment(order, None, "unparseable", verdict.reason, result.text)
    p_first = {"A": 1.0, "B": 0.0, "tie": 0.5}[verdict.winner or "tie"]
    return OrderJudgment(order, p_first, "ok", reply=result.text, source="parsed")


def from_structured(order: Order, result: GenerationResult) -> OrderJudgment:
    """The ``verdict`` field ("A", "B" or "tie") of a schema-valid reply. A reply that does
    not validate (cut at the token budget, or a server that ignored the schema) is read as a
    prose verdict line when it has one, else kept as an ``unparseable`` order with its raw
    text, like a free-text reply without a verdict."""
    if not result.ok:
        return OrderJudgment(order, None, result.status, result.error)
    sample = result.samples[0]
    if not sample.ok:
        # A server that ignores response_format may still write a prose verdict ("Verdict:
        # [[A]]"): parse it rather than score a letter appended to it (issue 19).
        verdict = parse_pairwise_verdict(sample.text, labels=("A", "B"))
        if verdict.ok:
            p_first = {"A": 1.0, "B": 0.0, "tie": 0.5}[verdict.winner or "tie"]
            return OrderJudgment(order, p_first, "ok", reply=sample.text, source="parsed")
        return OrderJudgment(order, None, "unparseable", sample.error, sample.text)
    p_first = {"A": 1.0, "B": 0.0, "tie": 0.5}[sample.value["verdict"]]
    return OrderJudgment(order, p_first, "ok", reply=sample.text, source="structured")


def from_scored_verdict(unparsed: OrderJudgment, result: ChoiceResult) -> OrderJudgment:
    """The verdict letter's probability scored after an unparseable reply; when that
    scoring fails too, the order stays ``unparseable``."""
    if not result.ok:
        return unparsed
    return OrderJudgment(
        unparsed.order, float(result.probs[0]), "ok", reply=unparsed.reply, source="scored"
    )


def combine(orders: tuple[OrderJudgment, ...], tie_margin: float) -> PairJudgment:
    """Average the orders; a tie when they disagree, when a reply is unparseable (PPR-GDE), or
    when the margin is under ``tie_margin``. A backend failure gives no winner at all."""
    failed = [o for o in orders if o.status not in ("ok", "unparseable")]
    if failed:
        return PairJudgment(orders, None, None, None, failed[0].status)
    if any(o.status == "unparseable" for o in orders):
        return PairJudgment(orders, None, "tie", None, "unparseable")
    p_a_values = [
        o.p_first if o.order == "ab" else 1 - o.p_first for o in orders if o.p_first is not None
    ]
    p_a = sum(p_a_values) / len(p_a_values)
    consistent = None
    if len(orders) == 2:
        a_first = {o.order: o.verdict for o in orders}
        consistent = (a_first["ab"], a_first["ba"]) in (("first", "second"), ("second", "first"))
    if consistent is False or abs(p_a - 0.5) < tie_margin or p_a == 0.5:
        winner: Literal["a", "b", "tie"] = "tie"
    else:
        winner = "a" if p_a > 0.5 else "b"
    return PairJudgment(orders, p_a, winner, consistent, "ok")
