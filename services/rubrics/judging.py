"""The judge calls of rubric scoring, one function per mode (no HTTP, no storage).

``logprob`` asks one yes/no question per (completion, criterion) row and reads P(yes) from a
single forward pass. The prompt puts the criterion last, so rows share their head at two
levels: instructions + question (+ reference answer) are the same in every row, and a
completion's rows also share the completion. Each completion's rows go to the backend as one
call (sent concurrently): a model worker that merges concurrent calls runs the instructions +
question once for all completions, and the local backend packs each completion's rows into one
sequence, the completion once and then every criterion (judges/backends/packing.py; see
BENCHMARKS.md, Rubrics).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from judges.backends.base import ChoiceResult, GenerateResult
from judges.templates import PromptTemplate
from plaudit_wire.rubrics import Criterion
from plaudit_wire.schemas import ItemStatus
from services.core.models.cached_judge import CachedJudge
from services.core.models.judge_model import JudgeModel
from services.rubrics.prompts import p_yes, render, rubric_listing
from services.rubrics.verdicts import parse_verdicts, verdicts_schema


@dataclass(frozen=True)
class Judged:
    """One criterion's verdict on one completion: P(met), or why there is none."""

    p: float | None
    status: ItemStatus
    coverage: float | None = None
    reason: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class Graded:
    """Implicit mode: the 1..k grade distribution of one completion, or why there is none."""

    probs: list[float] | None
    status: ItemStatus
    error: str | None = None


@dataclass(frozen=True)
class Case:
    """What every prompt of one request shares."""

    question: str
    reference: str | None
    criteria: Sequence[Criterion]
    use_cache: bool = True

    def values(self) -> dict[str, str]:
        shared = {"question": self.question}
        if self.reference is not None:
            shared["reference_answer"] = self.reference
        return shared


class RubricJudge:
    """Asks the judge about completions against a rubric, in the fewest backend calls.

    Example: ``rows = await RubricJudge(judge_service.model).logprob(template, case, texts)``.
    """

    def __init__(self, model: JudgeModel, *, max_new_tokens: int = 512) -> None:
        self._model = model
        self._judge = model.cached
        self._max_new_tokens = max_new_tokens

    def _code(self, template: PromptTemplate, case: Case) -> str | None:
        """The boundary code of this request's prompts (the judge's secret; one per question,
        so every row keeps the shared head)."""
        return self._model.fence_code(template, case.question)

    @property
    def judge(self) -> CachedJudge:
        return self._judge

    async def logprob(
        self, template: PromptTemplate, case: Case, texts: Sequence[str]
    ) -> list[list[Judged]]:
        """P(yes) per criterion of each completion: one backend call per completion."""
        code = self._code(template, case)
        calls = [
            [
                render(
                    template, code, response=text, criterion=c.text, **case.values()
                ).choice_request()
                for c in case.criteria
            ]
            for text in texts
        ]
        answers = await asyncio.gather(
            *(self._judge.score_choices(rows, use_cache=case.use_cache) for rows in calls)
        )
        return [[_from_choice(result) for result in rows] for rows in answers]

    async def generate(
        self, template: PromptTemplate, case: Case, texts: Sequence[str]
    ) -> list[list[Judged]]:
        """Every criterion's verdict from one generated JSON reply per completion, decoded
        under the per-criterion schema (:func:`verdicts_schema`) on every backend."""
        listing = rubric_listing(case.criteria)
        code = self._code(template, case)
        schema = verdicts_schema([c.id for c in case.criteria], self._max_new_tokens)
        requests = [
            dataclasses.replace(
                render(
                    template, code, response=text, rubric=listing, **case.values()
                ).generate_request(max_new_tokens=self._max_new_tokens),
                json_schema=schema,
            )
            for text in texts
        ]
        replies = await self._judge.generate(requests, use_cache=case.use_cache)
        return [_from_reply(reply, case.criteria) for reply in replies]

    async def implicit(
        self, template: PromptTemplate, case: Case, texts: Sequence[str], k: int
    ) -> list[Graded]:
        """One 1..k grade distribution per completion against the whole rubric."""
        listing = rubric_listing(case.criteria)
        code = self._code(template, case)
        requests = [
            render(
                template, code, response=text, rubric=listing, k=k, **case.values()
            ).choice_request()
            for text in texts
        ]
        results = await self._judge.score_choices(requests, use_cache=case.use_cache)
        return [
            Graded(list(r.probs), "ok") if r.ok else Graded(None, r.status, r.error)
            for r in results
        ]


def _from_choice(result: ChoiceResult) -> Judged:
    if not result.ok:
        return Judged(None, result.status, error=result.error)
    return Judged(p_yes(result.candidates, result.probs), "ok", coverage=result.coverage)


def _from_reply(reply: GenerateResult, criteria: Sequence[Criterion]) -> list[Judged]:
    if not reply.ok:
        return [Judged(None, reply.status, error=reply.error) for _ in criteria]
    parsed = parse_verdicts(reply.text, [c.id for c in criteria])
    if parsed.error is not None:
        return [Judged(None, "invalid_output", error=parsed.error) for _ in criteria]
    out = []
    for criterion in criteria:
        verdict = parsed.verdicts.get(criterion.id)
        if verdict is None:
            out.append(Judged(None, "invalid_output", error=f"no verdict for {criterion.id}"))
        else:
            out.append(Judged(1.0 if verdict.met else 0.0, "ok", reason=verdict.reason))
    return out
