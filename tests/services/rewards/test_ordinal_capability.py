"""ODRPO takes its levels from whichever channel declares that it grades on levels 1..K
(``ChannelSpec.ordinal_levels``), not from a channel the rewards service names (issue 20:
the rewards service imported the judge's spec class to find its K)."""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import Field

from services.core.channels import Channel, ChannelOutcome, ChannelSpec, GroupInput
from services.ordinal import estimators
from services.rewards.aggregate import EPS, advantages, completion_rewards
from services.rewards.spec import check_spec
from tests.channels import spec_registry


class StarsSpec(ChannelSpec):
    """Another service's 1..stars rating."""

    stars: int = Field(default=5, ge=2)

    def value_range(self) -> tuple[float, float] | None:
        return (1.0, float(self.stars))

    def ordinal_levels(self) -> int | None:
        return self.stars


async def _not_run(spec: Any, group: GroupInput) -> ChannelOutcome:
    raise AssertionError("not run here")


def test_odrpo_ranks_the_levels_of_any_channel_that_declares_them() -> None:
    registry = spec_registry()
    registry.add(Channel("stars", StarsSpec, _not_run))
    spec, errors = check_spec(
        {"channels": {"stars": {"stars": 4}, "diversity": {}}, "advantage": "odrpo"}, registry
    )
    assert errors == [] and spec is not None and spec.ordinal_channel == "stars"
    levels = [4, 1, 3, None]
    outcomes = {
        "stars": ChannelOutcome(
            values=[4.0, 1.0, 3.0, None],
            statuses=["ok", "ok", "ok", "error"],
            meta={},
            details=[{}] * 4,
            levels=levels,
        ),
        "diversity": ChannelOutcome(
            values=[0.1] * 4, statuses=["ok"] * 4, meta={}, details=[{}] * 4
        ),
    }
    rewards = completion_rewards(["a", "b", "c", "d"], spec, outcomes)
    got = advantages(spec, rewards, outcomes)
    mask = np.array([[True, True, True, False]])
    scores = np.array([[4, 1, 3, 1]], dtype=float)
    want, _, _ = estimators.odrpo_advantages(scores, mask, np.array([4]), eps=EPS)
    assert got[3] is None
    assert got[:3] == [float(a) for a in want[0][:3]]


def test_odrpo_without_a_graded_channel_is_refused_naming_one() -> None:
    _, errors = check_spec({"channels": {"diversity": {}}, "advantage": "odrpo"}, spec_registry())
    assert [e.param for e in errors] == ["spec.advantage"]
    assert "levels 1..K" in errors[0].message and "judge_scale" in errors[0].message
