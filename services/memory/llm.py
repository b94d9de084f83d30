"""The analyst and the editor: structured generation through any backend (judges.generation).

Both answer JSON constrained by a schema (xgrammar locally, ``response_format`` over the
OpenAI API). A reply that does not validate is kept as data (its status and raw text), never
guessed from: the embedded 135M model often writes valid but empty or off-topic JSON.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from judges.generation import GenerateFn, GenerationRequest, Sampling, generate
from plaudit_wire.rubrics import Criterion
from services.memory.operations import EditOperation
from services.memory.prompts import (
    ANALYSIS_SCHEMA,
    EDIT_SCHEMA,
    analyst_messages,
    editor_messages,
)


@dataclass(frozen=True)
class Analysis:
    status: str
    went_right: str = ""
    went_wrong: str = ""
    hacking: bool = False
    raw: str = ""


@dataclass(frozen=True)
class Proposal:
    """The editor's operations and rationale, or ``status`` saying why there are none."""

    status: str
    operations: list[EditOperation] = field(default_factory=list)
    rationale: str = ""
    raw: str = ""
    error: str | None = None


@dataclass(frozen=True)
class Rollout:
    question: str
    answer: str
    reward: float | None
    verdicts: Mapping[str, float | None]


async def analyse(
    call: GenerateFn, rollouts: Sequence[Rollout], criteria: Sequence[Criterion], max_tokens: int
) -> list[Analysis]:
    """One analysis per rollout, in one batched call."""
    requests = [
        GenerationRequest(
            analyst_messages(r.question, r.answer, r.reward, r.verdicts, criteria),
            Sampling(max_new_tokens=max_tokens),
            schema=ANALYSIS_SCHEMA,
        )
        for r in rollouts
    ]
    results = await generate(call, requests)
    out = []
    for result in results:
        if not result.ok or not result.samples:
            out.append(Analysis(status=result.status, raw=result.error or ""))
            continue
        sample = result.samples[0]
        if not sample.ok:
            out.append(Analysis(status=sample.status, raw=sample.text))
            continue
        value: dict[str, Any] = sample.value
        out.append(
            Analysis(
                status="ok",
                went_right=str(value["went_right"]).strip(),
                went_wrong=str(value["went_wrong"]).strip(),
                hacking=bool(value["hacking"]),
                raw=sample.text,
            )
        )
    return out


async def propose(
    call: GenerateFn,
    criteria: Sequence[Criterion],
    summary: str,
    history: Sequence[str],
    max_tokens: int,
) -> Proposal:
    """The editor's edit operations for the rubric."""
    request = GenerationRequest(
        editor_messages(criteria, summary, history),
        Sampling(max_new_tokens=max_tokens),
        schema=EDIT_SCHEMA,
    )
    [result] = await generate(call, [request])
    if not result.ok or not result.samples:
        return Proposal(status=result.status, error=result.error)
    sample = result.samples[0]
    if not sample.ok:
        return Proposal(status=sample.status, raw=sample.text, error=sample.error)
    try:
        operations = [_operation(item) for item in sample.value["operations"]]
    except ValidationError as exc:
        first = exc.errors()[0]
        return Proposal(status="invalid_output", raw=sample.text, error=str(first["msg"]))
    rationale = str(sample.value["rationale"]).strip()
    return Proposal(status="ok", operations=operations, rationale=rationale, raw=sample.text)


def _operation(item: Mapping[str, Any]) -> EditOperation:
    weight = item.get("weight", 0.0)
    return EditOperation.model_validate(
        {
            "op": item["op"],
            "id": str(item.get("id", "")).strip(),
            "text": str(item.get("text", "")).strip(),
            "weight": min(1000.0, max(0.0, float(weight)))
            if isinstance(weight, int | float)
            else 0.0,
        }
    )
