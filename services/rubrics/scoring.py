"""Scoring completions against a resolved rubric: judge, weigh, and report per criterion.

:func:`score_completions` is what both ``POST /v1/rubrics/score`` and the ``rubric`` reward
channel run once the rubric is known. A completion whose criterion could not be assessed gets
``reward = None`` and that criterion's status; the group is a 503 only when the backend failed
for every item (items that are all ``invalid``, such as inputs too long for the judge, are the
caller's data and come back with their statuses).
"""

from __future__ import annotations

from collections.abc import Sequence

from plaudit_wire.rubrics import (
    CompletionScore,
    Criterion,
    CriterionResult,
    RubricContent,
    RubricJudgeStamp,
    RubricRef,
    ScoreOptions,
    ScoreResponse,
)
from plaudit_wire.schemas import CompletionItem, completion_ids
from services.core.errors import BackendUnavailable, InvalidInput
from services.rubrics import aggregate
from services.rubrics.judging import Case, Graded, Judged, RubricJudge
from services.rubrics.prompts import load_template

FAILED = ("error", "timeout")


async def score_completions(
    judge: RubricJudge,
    rubric: RubricContent,
    ref: RubricRef,
    question: str,
    completions: Sequence[CompletionItem],
    options: ScoreOptions,
    *,
    use_cache: bool = True,
) -> ScoreResponse:
    """Judge ``completions`` against ``rubric`` in ``options.mode`` and weigh the verdicts."""
    template = load_template(options.template, options.mode, options.show_reference)
    weights = _weights(rubric.criteria, options)
    case = Case(
        question=question,
        reference=_reference(rubric, options.show_reference),
        criteria=rubric.criteria,
        use_cache=use_cache,
    )
    texts = [c.text for c in completions]
    ids = completion_ids(list(completions))
    if options.mode == "implicit":
        graded = await judge.implicit(template, case, texts, options.k)
        _unavailable_if_nothing_judged([g.status for g in graded], graded[0].error)
        results = [_graded(cid, g, options) for cid, g in zip(ids, graded, strict=True)]
        rates: dict[str, float | None] = {c.id: None for c in rubric.criteria}
    else:
        run = judge.logprob if options.mode == "logprob" else judge.generate
        judged = await run(template, case, texts)
        statuses = [j.status for row in judged for j in row]
        _unavailable_if_nothing_judged(statuses, _first_error(judged))
        results = [
            _explicit(cid, rubric.criteria, weights, row, options)
            for cid, row in zip(ids, judged, strict=True)
        ]
        rates = aggregate.pass_rates(rubric.criteria, [[j.p for j in row] for row in judged])
    info = judge.judge.backend.info
    return ScoreResponse(
        rubric=ref,
        mode=options.mode,
        normalize=options.normalize,
        aggregation=options.aggregation,
        results=results,
        pass_rates=rates,
        judge=RubricJudgeStamp(
            backend=info.name, model=info.model_id, template=template.ref, mode=options.mode
        ),
    )


def _weights(criteria: Sequence[Criterion], options: ScoreOptions) -> list[float]:
    if options.aggregation != "focal":
        return [c.weight for c in criteria]
    rates = options.pass_rates or {}
    unknown = sorted(set(rates) - {c.id for c in criteria})
    if unknown:
        raise InvalidInput(
            f"pass_rates names criteria this rubric does not have: {', '.join(unknown)}",
            param="pass_rates",
        )
    return aggregate.focal_weights(criteria, rates, options.focal_gamma)


def _reference(rubric: RubricContent, show: bool) -> str | None:
    if not show:
        return None
    if not rubric.reference_answer:
        raise InvalidInput(
            "show_reference is set but the rubric has no reference_answer", param="show_reference"
        )
    return rubric.reference_answer


def _explicit(
    cid: str,
    criteria: Sequence[Criterion],
    weights: Sequence[float],
    row: Sequence[Judged],
    options: ScoreOptions,
) -> CompletionScore:
    reward = aggregate.signed_reward(criteria, weights, [j.p for j in row], options.normalize)
    failed = next((j for j in row if j.status != "ok"), None)
    return CompletionScore(
        id=cid,
        reward=reward,
        status="ok" if failed is None else failed.status,
        error=None if failed is None else failed.error,
        criteria=[
            CriterionResult(
                id=c.id,
                p=j.p,
                weight=w,
                kind=c.kind,
                status=j.status,
                coverage=j.coverage,
                reason=j.reason,
                error=j.error,
            )
            for c, w, j in zip(criteria, weights, row, strict=True)
        ],
    )


def _graded(cid: str, graded: Graded, options: ScoreOptions) -> CompletionScore:
    if graded.probs is None:
        return CompletionScore(
            id=cid,
            reward=None,
            status=graded.status,
            error=graded.error,
            criteria=[],
        )
    grade = aggregate.expected_grade(graded.probs)
    reward = grade if options.normalize == "none" else aggregate.implicit_reward(graded.probs)
    return CompletionScore(
        id=cid,
        reward=reward,
        status="ok",
        criteria=[],
        grade=grade,
        distribution=graded.probs,
    )


def _first_error(judged: Sequence[Sequence[Judged]]) -> str | None:
    return next((j.error for row in judged for j in row if j.error), None)


def _unavailable_if_nothing_judged(statuses: Sequence[str], error: str | None) -> None:
    """503 when the backend failed for every item (a retry may help)."""
    if statuses and all(s in FAILED for s in statuses):
        raise BackendUnavailable(f"the judge could not answer: {error}", retry_after=5)
