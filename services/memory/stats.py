"""A step's statistics, computed exactly from its scored groups (pure: no I/O, no models).

For one step of a run (every group scored with one rubric during that step)::

    stats = step_stats(criteria, groups, saturation=0.9)
    stats.reward_mean, stats.reward_std      # over the completions that got a reward
    stats.pass_rates["c1"]                   # mean P(pass) of c1 (required: met, pitfall: avoided)
    stats.saturated, stats.non_separating    # criterion ids, in rubric order

A criterion *saturates* when its pass rate reaches the threshold: it no longer tells good
answers from weak ones (AMARIS raises the bar on such criteria). A criterion *never separates*
a group when every completion of the group got the same verdict (P(met) >= 0.5 is a pass);
``non_separating`` lists the criteria that separated no group of the step, counting only
groups with at least two assessed completions (a group advantage needs a difference within the
group, so such a criterion adds nothing to the policy gradient).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from plaudit_wire.rubrics import Criterion
from services.rubrics.aggregate import passed

#: A required criterion that asks for something to be present ("Mentions X", "Includes a
#: table"): the kind whose saturation goes with longer, padded answers in rubric RL.
PRESENCE = re.compile(
    r"^\s*(mentions?|includes?|contains?|lists?|names?|gives?|states?|says|cites?|provides?|"
    r"explains?|describes?|addresses|covers?|notes?|discusses?)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class GroupVerdicts:
    """One scored group: per completion its reward, its verdicts (id -> P(met)) and length."""

    rewards: Sequence[float | None]
    verdicts: Sequence[Mapping[str, float | None]]
    lengths: Sequence[int]


@dataclass(frozen=True)
class StepStats:
    groups: int
    completions: int
    reward_mean: float | None
    reward_std: float | None
    pass_rates: dict[str, float | None]
    saturated: list[str]
    non_separating: list[str]
    length_corr: float | None
    extra: dict[str, float] = field(default_factory=dict)

    def wire(self) -> dict[str, object]:
        return {
            "groups": self.groups,
            "completions": self.completions,
            "reward_mean": _finite(self.reward_mean),
            "reward_std": _finite(self.reward_std),
            "pass_rates": self.pass_rates,
            "saturated": self.saturated,
            "non_separating": self.non_separating,
            "length_corr": _finite(self.length_corr),
        }


def mean_std(values: Sequence[float]) -> tuple[float | None, float | None]:
    """Mean and population standard deviation (None, None for no values).

    >>> mean_std([1.0, 3.0])
    (2.0, 1.0)
    """
    if not values:
        return None, None
    mean = sum(values) / len(values)
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
    if math.isfinite(mean) and math.isfinite(std):
        return mean, std
    return _scaled_mean_std(values)


def _scaled_mean_std(values: Sequence[float]) -> tuple[float | None, float | None]:
    """Issue 23: rewards near 1e308 overflow the sums (the step was never summarised); the
    same statistics over values scaled into [-1, 1], None where even they do not fit."""
    scale = max(abs(v) for v in values)
    if not math.isfinite(scale) or scale == 0:
        return None, None
    mean, std = mean_std([v / scale for v in values])
    assert mean is not None and std is not None
    return _finite(mean * scale), _finite(std * scale)


def _finite(value: float | None) -> float | None:
    return value if value is None or math.isfinite(value) else None


def pearson(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Pearson's r, or None with fewer than three points or a constant series.

    >>> pearson([1, 2, 3], [2, 4, 6])
    1.0
    """
    if len(xs) < 3:
        return None
    mx, sx = mean_std(xs)
    my, sy = mean_std(ys)
    if not sx or not sy or mx is None or my is None:
        return None
    cov = sum((x - mx) / sx * ((y - my) / sy) for x, y in zip(xs, ys, strict=True)) / len(xs)
    return round(cov, 12) if math.isfinite(cov) else None


def pass_rates(
    criteria: Sequence[Criterion], groups: Sequence[GroupVerdicts]
) -> dict[str, float | None]:
    """Per criterion, the mean probability of passing over every assessed completion."""
    out: dict[str, float | None] = {}
    for c in criteria:
        values = [
            passed(c.kind, p) for g in groups for v in g.verdicts if (p := v.get(c.id)) is not None
        ]
        out[c.id] = sum(values) / len(values) if values else None
    return out


def non_separating(criteria: Sequence[Criterion], groups: Sequence[GroupVerdicts]) -> list[str]:
    """The criteria that gave every member of every group the same verdict."""
    out = []
    for c in criteria:
        seen = False
        separated = False
        for group in groups:
            verdicts = {p >= 0.5 for v in group.verdicts if (p := v.get(c.id)) is not None}
            assessed = sum(1 for v in group.verdicts if v.get(c.id) is not None)
            if assessed >= 2:
                seen = True
                separated = separated or len(verdicts) > 1
        if seen and not separated:
            out.append(c.id)
    return out


def step_stats(
    criteria: Sequence[Criterion], groups: Sequence[GroupVerdicts], *, saturation: float
) -> StepStats:
    """Every statistic of one step (see the module's docstring)."""
    rewards = [r for g in groups for r in g.rewards if r is not None]
    pairs = [
        (float(length), r)
        for g in groups
        for r, length in zip(g.rewards, g.lengths, strict=True)
        if r is not None
    ]
    mean, std = mean_std(rewards)
    rates = pass_rates(criteria, groups)
    return StepStats(
        groups=len(groups),
        completions=sum(len(g.rewards) for g in groups),
        reward_mean=mean,
        reward_std=std,
        pass_rates=rates,
        saturated=[c.id for c in criteria if (r := rates[c.id]) is not None and r >= saturation],
        non_separating=non_separating(criteria, groups),
        length_corr=pearson([p[0] for p in pairs], [p[1] for p in pairs]),
    )


def presence_criteria(criteria: Sequence[Criterion]) -> list[str]:
    """The required criteria that ask for something to be present (see :data:`PRESENCE`)."""
    return [c.id for c in criteria if c.kind == "required" and PRESENCE.match(c.text)]


def hacking_signal(
    criteria: Sequence[Criterion],
    current: StepStats,
    earlier_corr: Sequence[float | None],
    *,
    rise: float,
) -> str | None:
    """Why the run looks like reward hacking at this step, or None.

    The flag needs both: a presence-type criterion saturated now, and the reward's correlation
    with length risen by at least ``rise`` over its mean in the earlier steps (the failure of
    rubric RL where completeness criteria climb while concision falls).
    """
    saturated = [cid for cid in presence_criteria(criteria) if cid in current.saturated]
    baseline = [c for c in earlier_corr if c is not None]
    if not saturated or current.length_corr is None or not baseline:
        return None
    before = sum(baseline) / len(baseline)
    if current.length_corr - before < rise:
        return None
    return (
        f"presence criteria {', '.join(saturated)} saturated while the reward-length "
        f"correlation rose from {before:.2f} to {current.length_corr:.2f}"
    )


def summary_text(step: int, criteria: Sequence[Criterion], stats: StepStats) -> str:
    """The written summary of a step, from its statistics (deterministic)."""
    text = {c.id: c.text for c in criteria}
    parts = [f"Step {step}: {stats.completions} completions in {stats.groups} groups"]
    if stats.reward_mean is not None and stats.reward_std is not None:
        parts.append(f"reward mean {stats.reward_mean:.3f} (std {stats.reward_std:.3f})")
    rated = [(cid, r) for cid, r in stats.pass_rates.items() if r is not None]
    weakest = sorted(rated, key=lambda item: item[1])[:2]
    if weakest:
        parts.append(
            "most failed: "
            + "; ".join(f"{cid} '{text[cid][:80]}' passed {r:.0%}" for cid, r in weakest)
        )
    if stats.saturated:
        parts.append(
            "saturated: "
            + "; ".join(f"{cid} '{text[cid][:80]}'" for cid in stats.saturated)
            + " (make harder or replace)"
        )
    if stats.non_separating:
        parts.append("never separates a group: " + ", ".join(stats.non_separating))
    if stats.length_corr is not None:
        parts.append(f"reward-length correlation {stats.length_corr:.2f}")
    return ". ".join(parts) + "."
