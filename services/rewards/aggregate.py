"""Channel values -> weighted totals, advantages and group statistics (pure, no I/O).

The rule that matters: a completion whose channel failed (value None or a status without a
value) has ``total = None`` and that channel's status; it gets no advantage and is left out of
every group statistic. A failure is never a silent 0 (ARCHITECTURE.md, API conventions). An
``empty`` completion is not a failure: it has the channel's floor value and a total, and keeps
the status ``empty`` as its flag.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from plaudit_wire.rewards import (
    ChannelResult,
    ChannelStats,
    CompletionReward,
    RewardStats,
)
from plaudit_wire.schemas import VALUED_STATUSES
from services.core.channels import ChannelOutcome
from services.ordinal import estimators
from services.rewards.spec import ResolvedSpec

EPS = 1e-6


def channel_result(outcome: ChannelOutcome, i: int) -> ChannelResult:
    """Completion ``i``'s entry of a channel; an ok status without a value is an error."""
    error = outcome.errors[i] if i < len(outcome.errors) else None
    value = outcome.values[i]
    status = outcome.statuses[i]
    if status == "ok" and value is None:
        status, error = "error", error or "the channel gave no value"
    return ChannelResult(
        value=value, status=status, meta=outcome.meta, detail=outcome.details[i], error=error
    )


def completion_rewards(
    ids: Sequence[str], spec: ResolvedSpec, outcomes: Mapping[str, ChannelOutcome]
) -> list[CompletionReward]:
    """Weighted totals per completion.

    >>> from services.diversity.channels import DiversitySpec
    >>> spec = ResolvedSpec(channels={"diversity": DiversitySpec(weight=2.0)}, advantage="none")
    >>> out = ChannelOutcome(values=[0.5, None], statuses=["ok", "error"], meta={},
    ...                      details=[{}, {}])
    >>> [r.total for r in completion_rewards(["a", "b"], spec, {"diversity": out})]
    [1.0, None]
    """
    rewards = []
    for i, cid in enumerate(ids):
        channels = {name: channel_result(outcomes[name], i) for name in sorted(outcomes)}
        failed = [c.status for c in channels.values() if c.status not in VALUED_STATUSES]
        flagged = [c.status for c in channels.values() if c.status != "ok"]
        total = None
        if not failed:
            total = float(
                sum(spec.channels[n].weight * (c.value or 0.0) for n, c in channels.items())
            )
        rewards.append(
            CompletionReward(
                id=cid,
                total=total,
                status=(failed or flagged or ["ok"])[0],
                channels=channels,
            )
        )
    return rewards


def advantages(
    spec: ResolvedSpec,
    rewards: Sequence[CompletionReward],
    outcomes: Mapping[str, ChannelOutcome],
) -> list[float | None]:
    """GRPO on the totals, or ODRPO on the most likely level of the channel that grades on
    levels 1..K (judge_scale; :meth:`ResolvedSpec.ordinal_channel`), with its K.

    Completions without a total get None and take no part in the group's mean and std.
    """
    if spec.advantage == "none":
        return [None] * len(rewards)
    mask = np.array([[r.total is not None for r in rewards]])
    if spec.advantage == "grpo":
        totals = np.array([[r.total if r.total is not None else 0.0 for r in rewards]])
        adv = estimators.scalar_advantages(totals, mask, "grpo", EPS)
    else:
        graded = spec.ordinal_channel
        k = spec.channels[graded].ordinal_levels() if graded else None
        assert graded is not None and k is not None  # check_spec refuses odrpo without one
        levels = outcomes[graded].levels or [None] * len(rewards)
        mask &= np.array([[level is not None for level in levels]])
        scores = np.array([[level if level is not None else 1 for level in levels]], dtype=float)
        adv, _, _ = estimators.odrpo_advantages(scores, mask, np.array([k]), eps=EPS)
    return [float(a) if ok else None for a, ok in zip(adv[0], mask[0], strict=True)]


def group_stats(rewards: Sequence[CompletionReward]) -> RewardStats:
    """Mean and population std of the totals and of each channel, over completions with a total.

    >>> group_stats([]).ok
    0
    """
    scored = [r for r in rewards if r.total is not None]
    names = sorted(rewards[0].channels) if rewards else []
    per_channel = {
        name: ChannelStats(
            **_mean_std([r.channels[name].value for r in scored]),
            failed=sum(1 for r in rewards if r.channels[name].status not in VALUED_STATUSES),
        )
        for name in names
    }
    return RewardStats(
        **_mean_std([r.total for r in scored]),
        ok=len(scored),
        failed=len(rewards) - len(scored),
        per_channel=per_channel,
    )


def _mean_std(values: Sequence[float | None]) -> dict[str, float | None]:
    present = np.array([v for v in values if v is not None], dtype=np.float64)
    if present.size == 0:
        return {"mean": None, "std": None}
    return {"mean": float(present.mean()), "std": float(present.std())}
