"""A channel registry with the built-in channels' specs, for tests of specs alone."""

from __future__ import annotations

from typing import Any

from plaudit_wire.rewards import SpecError
from services.core.channels import Channel, ChannelOutcome, ChannelRegistry, GroupInput
from services.diversity.channels import DiversitySpec
from services.judge.channels import JudgePairwiseSpec, JudgeScaleSpec
from services.rewards.spec import ResolvedSpec, check_spec, resolve_spec


async def _not_run(spec: Any, group: GroupInput) -> ChannelOutcome:
    raise AssertionError("spec tests never run a channel")


def spec_registry() -> ChannelRegistry:
    """The built-in channels' specs, with runners that must not be called."""
    registry = ChannelRegistry()
    registry.add(Channel("judge_pairwise", JudgePairwiseSpec, _not_run))
    registry.add(Channel("judge_scale", JudgeScaleSpec, _not_run))
    registry.add(Channel("diversity", DiversitySpec, _not_run))
    return registry


def resolve(raw: Any) -> ResolvedSpec:
    return resolve_spec(raw, spec_registry())


def check(raw: Any) -> tuple[ResolvedSpec | None, list[SpecError]]:
    return check_spec(raw, spec_registry())
