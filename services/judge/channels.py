"""The judge's reward channels: ``judge_pairwise`` (a tournament), ``judge_scale`` (1..K)
and ``judge_listwise`` (the whole group in one call)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from judges.templates import TemplateNotFoundError, load_template
from plaudit_wire.judge import JudgeOptions, Mode
from services.core.channels import (
    Channel,
    ChannelOptionError,
    ChannelOutcome,
    ChannelSpec,
    GroupInput,
)
from services.core.validation import need_two
from services.judge import listwise
from services.judge.service import (
    DEFAULT_SCALE_TEMPLATE,
    DEFAULT_TEMPLATES,
    JudgeService,
    prompt_text,
    truncated_flags,
)


class JudgePairwiseSpec(ChannelSpec):
    """Pairwise judge tournament (``JudgeService.group``): value = the completion's reward."""

    needs_group = True

    pairing: Literal["adjacent", "round_robin"] = "adjacent"
    budget: int | None = Field(default=None, ge=1, description="round_robin: random pairs")
    scoring: Literal["pprgde", "win_rate", "bradley_terry"] = "pprgde"
    mode: Mode = "logprob"
    swap: bool = True
    template: str | None = None
    criteria: str | None = Field(default=None, max_length=4000)
    length_discount: bool = False

    def value_range(self) -> tuple[float, float] | None:
        # PPR-GDE rewards lie in [-1, 1], win rates in [0, 1]; Bradley-Terry log-strengths are
        # unbounded.
        if self.scoring == "bradley_terry":
            return None
        return (-1.0, 1.0) if self.scoring == "pprgde" else (0.0, 1.0)

    def resolved(self) -> JudgePairwiseSpec:
        kind = "choice" if self.mode == "logprob" else "generate"
        return self.model_copy(
            update={"template": _pinned(self.template or DEFAULT_TEMPLATES[self.mode], kind)}
        )


class JudgeScaleSpec(ChannelSpec):
    """Pointwise 1..K grade (``JudgeService.scale``): value = the expected grade."""

    k: int = Field(default=10, ge=2, le=100)
    criteria: str | None = Field(default=None, max_length=4000)
    template: str | None = None

    def value_range(self) -> tuple[float, float] | None:
        return (1.0, float(self.k))

    def ordinal_levels(self) -> int | None:
        return self.k

    def resolved(self) -> JudgeScaleSpec:
        return self.model_copy(
            update={"template": _pinned(self.template or DEFAULT_SCALE_TEMPLATE, "choice")}
        )


class JudgeListwiseSpec(ChannelSpec):
    """Listwise judge (``JudgeService.listwise``): value = the judge's 0..10 score / 10."""

    needs_group = True

    criteria: str | None = Field(default=None, max_length=4000)
    template: str | None = None
    max_new_tokens: int | None = Field(
        default=None, ge=16, le=4096, description="default 16 per completion plus 16"
    )

    def value_range(self) -> tuple[float, float] | None:
        return (0.0, 1.0)

    def resolved(self) -> JudgeListwiseSpec:
        ref = _pinned(self.template or listwise.DEFAULT_TEMPLATE, "generate")
        return self.model_copy(update={"template": ref})


def _pinned(ref: str, kind: str) -> str:
    """A template name pinned to its version (``scale`` -> ``scale@2``), of the right kind."""
    try:
        template = load_template(ref)
    except TemplateNotFoundError as exc:
        raise ChannelOptionError("template", str(exc.args[0])) from None
    if template.kind != kind:
        raise ChannelOptionError(
            "template",
            f"template {template.ref} is a {template.kind} template; this channel needs a "
            f"{kind} one",
        )
    return template.ref


def judge_channels(judge: JudgeService) -> list[Channel]:
    """The judge's channels, run by ``judge``."""

    async def pairwise(spec: JudgePairwiseSpec, group: GroupInput) -> ChannelOutcome:
        need_two("judge_pairwise", group.completions)
        # The spec already holds checked values (its template pinned by resolved()).
        options = JudgeOptions(
            mode=spec.mode,
            swap=spec.swap,
            template=spec.template,
            criteria=spec.criteria,
            cache=judge.channel_cache,
        )
        g = len(group.completions)
        played = await judge.tournament(
            prompt_text(group.prompt),
            [c.text for c in group.completions],
            options,
            pairing=spec.pairing,
            budget=spec.budget,
            scoring=spec.scoring,
            truncated=truncated_flags(g, None, group.finish_reasons),
            lengths=None if group.token_counts is None else [float(n) for n in group.token_counts],
            length_discount=spec.length_discount,
        )
        meta = {
            **played.stamp.model_dump(),
            "scoring": spec.scoring,
            "pairing": spec.pairing,
            "inconsistency_rate": played.inconsistency_rate(),
        }
        return ChannelOutcome(
            values=played.rewards,
            statuses=played.statuses,
            meta=meta,
            details=[
                {"tie": tie, "pairs": pairs}
                for tie, pairs in zip(played.tie_mask, played.judged_pairs, strict=True)
            ],
        )

    async def scale(spec: JudgeScaleSpec, group: GroupInput) -> ChannelOutcome:
        grades = await judge.grade(
            prompt_text(group.prompt),
            [c.text for c in group.completions],
            k=spec.k,
            criteria=spec.criteria,
            template=spec.template,
            cache=judge.channel_cache,
        )
        modes = grades.modes()
        return ChannelOutcome(
            values=grades.expected(),
            statuses=grades.statuses,
            meta={**grades.stamp.model_dump(), "k": grades.k},
            details=[
                {"mode": mode, "distribution": distribution}
                for mode, distribution in zip(modes, grades.distributions, strict=True)
            ],
            errors=grades.errors,
            levels=modes,
        )

    async def listwise_channel(spec: JudgeListwiseSpec, group: GroupInput) -> ChannelOutcome:
        need_two("judge_listwise", group.completions)
        outcome, stamp = await judge.rank_listwise(
            prompt_text(group.prompt),
            [c.text for c in group.completions],
            criteria=spec.criteria,
            template=spec.template,
            max_new_tokens=spec.max_new_tokens,
            cache=judge.channel_cache,
        )
        return ChannelOutcome(
            values=outcome.rewards,
            statuses=list(outcome.statuses),
            meta={
                **stamp.model_dump(),
                "calls": outcome.calls,
                "completion_tokens": outcome.completion_tokens,
            },
            details=[{} for _ in outcome.rewards],
            errors=outcome.errors,
        )

    return [
        Channel(
            "judge_pairwise",
            JudgePairwiseSpec,
            pairwise,
            "pairwise judge tournament over the group, asked in both orders",
        ),
        Channel("judge_scale", JudgeScaleSpec, scale, "pointwise 1..K grade (expected value)"),
        Channel(
            "judge_listwise",
            JudgeListwiseSpec,
            listwise_channel,
            "listwise judge: the whole group scored 0..10 in one call (score / 10)",
        ),
    ]
