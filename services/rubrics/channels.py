"""The ``rubric`` reward channel: each completion's rubric reward, with per-criterion verdicts.

The rubric comes from the spec (``rubric_id``: ``rb_...`` or ``rb_...@N``, or an inline
``rubric``) or per row from a dataset column (``column``, default ``rubric_id``) that the
trainer sends with the group (``columns`` of ``/v1/rewards/group``; ``plaudit_reward_func``
forwards TRL's dataset column). A row's column wins over the spec, so one spec can carry a
default rubric for rows without one.

Each group's meta carries the rubric it used, the judge and ``metrics`` for trainer logs:
``pass_rate/required`` and ``pass_rate/pitfall`` (mean share of criteria passed) and, when
the rubric comes from the spec (the same for every group), ``pass_rate/<criterion id>``.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from plaudit_wire.rubrics import (
    InlineRubric,
    RubricContent,
    RubricRef,
    RubricReference,
    ScoreOptions,
    ScoreResponse,
)
from services.core.channels import (
    Channel,
    ChannelOptionError,
    ChannelOutcome,
    ChannelSpec,
    GroupInput,
)
from services.core.errors import InvalidInput
from services.judge.service import prompt_text
from services.rubrics import adaptive, aggregate
from services.rubrics.prompts import load_template
from services.rubrics.service import RubricsService

CHANNEL = "rubric"


class RubricSpec(ChannelSpec, ScoreOptions):
    """Rubric rewards (``RubricsService``): value = the completion's rubric reward."""

    rubric_id: RubricReference | None = None
    rubric: InlineRubric | None = None
    column: str = Field(
        default="rubric_id",
        min_length=1,
        max_length=100,
        description="the dataset column naming each row's rubric (it wins over rubric_id)",
    )
    cache: bool = True
    adaptive: bool = Field(
        default=False,
        description="send scored groups of a run (run_id, step) to the evaluation memory, "
        "which revises the rubric in the background; focal aggregation without pass_rates "
        "then uses the memory's",
    )

    @model_validator(mode="after")
    def _focal_needs_rates(self) -> RubricSpec:  # replaces ScoreOptions' check
        if self.aggregation == "focal" and not self.pass_rates and not self.adaptive:
            raise ValueError(
                "aggregation 'focal' needs pass_rates (per criterion id), or adaptive: true "
                "(the evaluation memory's pass rates)"
            )
        for cid, rate in (self.pass_rates or {}).items():
            if not 0.0 <= rate <= 1.0:
                raise ValueError(f"pass_rates[{cid}] must lie in [0, 1]")
        return self

    def value_range(self) -> tuple[float, float] | None:
        # The signed reward lies in [-(pitfall weight / required weight), 1]: known only for
        # an inline rubric. Implicit grades map onto [0, 1] (or 1..k with normalize none).
        if self.mode == "implicit":
            return (0.0, 1.0) if self.normalize != "none" else (1.0, float(self.k))
        if self.normalize == "none" or self.rubric is None:
            return None
        required = sum(c.weight for c in self.rubric.criteria if c.kind == "required")
        pitfalls = sum(c.weight for c in self.rubric.criteria if c.kind == "pitfall")
        return (-pitfalls / required, 1.0) if required > 0 else None

    def resolved(self) -> RubricSpec:
        try:
            template = load_template(self.template, self.mode, self.show_reference)
        except InvalidInput as exc:
            raise ChannelOptionError("template", exc.message) from None
        return self.model_copy(update={"template": template.ref})


def rubric_channels(service: RubricsService) -> list[Channel]:
    """The ``rubric`` channel, run by ``service``."""

    async def run(spec: RubricSpec, group: GroupInput) -> ChannelOutcome:
        try:
            ref, rubric, from_spec = await _rubric_for(service, spec, group)
            options = _options(spec, service, group, ref, rubric)
            response = await service.score_resolved(
                ref, rubric, group.prompt, group.completions, options, use_cache=spec.cache
            )
        except InvalidInput as exc:
            raise _in_spec(exc) from None
        outcome = _outcome(response, rubric, from_spec)
        if spec.adaptive:
            texts = [c.text for c in group.completions]
            question = prompt_text(group.prompt)
            outcome.meta["memory"] = adaptive.remember(
                service.adaptive_sink, group.run_id, group.step, ref, question, texts, response
            )
        return outcome

    return [
        Channel(
            CHANNEL,
            RubricSpec,
            run,
            "rubric reward: weighted per-criterion verdicts (rubric per spec or per dataset row)",
        )
    ]


def _options(
    spec: RubricSpec,
    service: RubricsService,
    group: GroupInput,
    ref: RubricRef,
    rubric: RubricContent,
) -> ScoreOptions:
    """The scoring options; adaptive focal without pass_rates takes the memory's (weighted
    until the memory has summarised a step of the run)."""
    fields = spec.model_dump(include=set(ScoreOptions.model_fields))
    if spec.aggregation == "focal" and not spec.pass_rates:
        rates = adaptive.focal_rates(service.adaptive_sink, group.run_id, ref, rubric)
        fields.update({"pass_rates": rates} if rates else {"aggregation": "weighted"})
    return ScoreOptions.model_validate(fields)


async def _rubric_for(
    service: RubricsService, spec: RubricSpec, group: GroupInput
) -> tuple[RubricRef, RubricContent, bool]:
    """The row's rubric (its column) or the spec's, and whether it came from the spec."""
    value = (group.columns or {}).get(spec.column)
    if value is not None:
        if not isinstance(value, str):
            raise InvalidInput(
                f"column {spec.column!r} must name a rubric (rb_... or rb_...@N)",
                param=f"columns.{spec.column}",
            )
        ref, rubric = await service.resolve(value, param=f"columns.{spec.column}")
        return ref, rubric, False
    if spec.rubric_id is not None:
        ref, rubric = await service.resolve(spec.rubric_id, param="rubric_id")
        return ref, rubric, True
    if spec.rubric is not None:
        ref, rubric = service.inline(spec.rubric, param="rubric")
        return ref, rubric, True
    raise InvalidInput(
        f"the rubric channel needs a rubric: give rubric_id or rubric in the spec, or send a "
        f"{spec.column!r} column with the group",
        param=f"columns.{spec.column}",
    )


def _in_spec(exc: InvalidInput) -> InvalidInput:
    """A complaint about a spec option names it within the spec (``spec.channels.rubric.*``)."""
    param = exc.param or ""
    head = param.split(".")[0].split("[")[0]
    if head in RubricSpec.model_fields and head not in ("prompt", "completions"):
        return InvalidInput(exc.message, param=f"spec.channels.{CHANNEL}.{param}")
    return exc


def _outcome(response: ScoreResponse, rubric: RubricContent, from_spec: bool) -> ChannelOutcome:
    return ChannelOutcome(
        values=[r.reward for r in response.results],
        statuses=[r.status for r in response.results],
        meta={
            "rubric": response.rubric.model_dump(),
            "mode": response.mode,
            "judge": response.judge.model_dump(),
            "pass_rates": response.pass_rates,
            "metrics": _metrics(rubric, response.pass_rates, from_spec),
        },
        details=[_detail(r.criteria, r.grade) for r in response.results],
        errors=[r.error for r in response.results],
    )


def _detail(criteria: list[Any], grade: float | None) -> dict[str, Any]:
    detail: dict[str, Any] = {"criteria": {c.id: c.p for c in criteria}}
    if grade is not None:
        detail["grade"] = grade
    return detail


def _metrics(
    rubric: RubricContent, rates: dict[str, float | None], from_spec: bool
) -> dict[str, float]:
    by_kind = aggregate.kind_pass_rates(rubric.criteria, rates)
    metrics = {f"pass_rate/{kind}": value for kind, value in by_kind.items()}
    if from_spec:
        metrics.update({f"pass_rate/{cid}": r for cid, r in rates.items() if r is not None})
    return metrics
