"""Reward channels: each one asks an existing service about the whole group at once.

A channel turns a :class:`RewardsGroupRequest` and its resolved options into a
:class:`ChannelOutcome` (one value and status per completion, plus what produced them).
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from services.core.errors import InvalidInput
from services.diversity.schemas import DiversityRequest
from services.diversity.service import DiversityService
from services.judge.schemas import GroupRequest, ScaleRequest
from services.judge.service import JudgeService
from services.rewards.aggregate import ChannelOutcome
from services.rewards.schemas import RewardsGroupRequest
from services.rewards.spec import (
    ChannelSpec,
    DiversitySpec,
    JudgePairwiseSpec,
    JudgeScaleSpec,
)

M = TypeVar("M", bound=BaseModel)


class ChannelRunner:
    """Computes one named channel for a group.

    Example: ``await runner.run("diversity", DiversitySpec(weight=0.5), request)``.
    """

    def __init__(self, judge: JudgeService, diversity: DiversityService) -> None:
        self._judge = judge
        self._diversity = diversity

    async def run(
        self, name: str, spec: ChannelSpec, request: RewardsGroupRequest
    ) -> ChannelOutcome:
        """The channel's outcome; a service's complaint about an option names the spec field."""
        try:
            if isinstance(spec, JudgePairwiseSpec):
                return await self._pairwise(spec, request)
            if isinstance(spec, JudgeScaleSpec):
                return await self._scale(spec, request)
            if isinstance(spec, DiversitySpec):
                return await self._diversity_channel(spec, request)
        except InvalidInput as exc:
            if exc.param in type(spec).model_fields:
                raise InvalidInput(exc.message, param=f"spec.channels.{name}.{exc.param}") from None
            raise
        raise InvalidInput(f"channel {name!r} has no runner", param=f"spec.channels.{name}")

    async def _pairwise(
        self, spec: JudgePairwiseSpec, request: RewardsGroupRequest
    ) -> ChannelOutcome:
        _need_two("judge_pairwise", request)
        lengths = None if request.token_counts is None else [float(n) for n in request.token_counts]
        options = spec.model_dump(exclude={"weight"})
        group = _build(
            GroupRequest,
            prompt=request.prompt,
            completions=request.completions,
            finish_reasons=request.finish_reasons,
            lengths=lengths,
            **options,
        )
        response = await self._judge.group(group)
        meta = {
            **response.judge.model_dump(),
            "scoring": response.scoring,
            "pairing": response.pairing,
            "inconsistency_rate": response.inconsistency_rate,
        }
        return ChannelOutcome(
            values=[r.reward for r in response.results],
            statuses=[r.status for r in response.results],
            meta=meta,
            details=[{"tie": r.tie, "pairs": r.pairs} for r in response.results],
        )

    async def _scale(self, spec: JudgeScaleSpec, request: RewardsGroupRequest) -> ChannelOutcome:
        scale = _build(
            ScaleRequest,
            prompt=request.prompt,
            completions=request.completions,
            **spec.model_dump(exclude={"weight"}),
        )
        response = await self._judge.scale(scale)
        return ChannelOutcome(
            values=[r.expected for r in response.results],
            statuses=[r.status for r in response.results],
            meta={**response.judge.model_dump(), "k": response.k},
            details=[{"mode": r.mode, "distribution": r.distribution} for r in response.results],
            errors=[r.error for r in response.results],
            levels=[r.mode for r in response.results],
        )

    async def _diversity_channel(
        self, spec: DiversitySpec, request: RewardsGroupRequest
    ) -> ChannelOutcome:
        _need_two("diversity", request)
        diversity = _build(
            DiversityRequest,
            completions=request.completions,
            **spec.model_dump(exclude={"weight"}),
        )
        response = await self._diversity.score_group(diversity)
        return ChannelOutcome(
            values=[r.reward for r in response.results],
            statuses=[r.status for r in response.results],
            meta={
                "embedder": response.embedder,
                "metric": response.metric,
                "scaling": response.scaling,
            },
            details=[{"distance": r.distance} for r in response.results],
        )


def _need_two(channel: str, request: RewardsGroupRequest) -> None:
    if len(request.completions) < 2:
        raise InvalidInput(
            f"the {channel} channel compares completions: it needs at least 2",
            param="completions",
        )


def _build(model: type[M], **fields: Any) -> M:
    """A sub-request; a value it rejects is the caller's mistake (422), never a 500."""
    try:
        return model.model_validate(fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        param = ".".join(str(p) for p in first.get("loc", ())) or None
        raise InvalidInput(f"{param}: {first.get('msg')}", param=param) from None
