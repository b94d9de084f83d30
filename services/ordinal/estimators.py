"""Group advantage estimators, vectorized over many groups at once (pure numpy, no I/O).

Groups are a padded matrix ``scores[n, g]`` with a boolean ``mask[n, g]`` marking real entries,
so groups of different sizes are computed in one pass. See METHODS.md (GRPO, ODRPO).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
Estimator = Literal["odrpo", "grpo", "maxrl", "dr_grpo"]
StepScaling = Literal["std", "mean", "none"]


def _safe_divide(num: FloatArray, den: FloatArray) -> FloatArray:
    """num / den, with 0 where den is 0 (a group without signal gets no advantage, never NaN)."""
    out = np.zeros(np.broadcast(num, den).shape, dtype=np.float64)
    np.divide(num, den, out=out, where=den != 0)
    return out


def group_mean(values: FloatArray, mask: BoolArray) -> FloatArray:
    """Per-group mean over the real entries, shape ``[n, 1]``."""
    counts = mask.sum(axis=1, keepdims=True)
    return _safe_divide((values * mask).sum(axis=1, keepdims=True), counts.astype(np.float64))


def scalar_advantages(
    rewards: FloatArray, mask: BoolArray, estimator: Estimator, eps: float
) -> FloatArray:
    """GRPO ((r - mean) / (std + eps)), MaxRL ((r - mean) / (mean + eps)), Dr.GRPO (r - mean).

    The std is the population std within the group. Groups of one, or with equal rewards,
    get zeros.
    """
    mean = group_mean(rewards, mask)
    centered = (rewards - mean) * mask
    if estimator == "dr_grpo":
        return centered
    if estimator == "grpo":
        spread = np.sqrt(group_mean(centered**2, mask))
    elif estimator == "maxrl":
        spread = np.abs(mean)
    else:  # pragma: no cover - guarded by the schema
        raise ValueError(f"not a scalar estimator: {estimator}")
    # A group with no spread carries no signal: force 0 even when eps is 0.
    scaled = _safe_divide(centered, np.where(spread > 0, spread + eps, 0.0))
    return scaled * mask


def ladder(scores: FloatArray, k_max: int) -> FloatArray:
    """Binary ladder b[..., j] = 1 if score >= j + 2, for thresholds 2..k_max."""
    thresholds = np.arange(2, k_max + 1, dtype=np.float64)
    return (scores[..., None] >= thresholds).astype(np.float64)


def odrpo_advantages(
    scores: FloatArray,
    mask: BoolArray,
    k: npt.NDArray[np.int64],
    *,
    scaling: StepScaling = "std",
    weights: FloatArray | None = None,
    eps: float = 1e-6,
) -> tuple[FloatArray, FloatArray, BoolArray]:
    """ODRPO advantages and the per-threshold pass rates and activity.

    ``scores`` hold integer levels 1..k[n] per group. Returns ``(advantages [n, g],
    pass_rates [n, K-1], active [n, K-1])`` with K = max(k); thresholds above a group's own K
    are inactive. ``scaling``: "std" divides each step by sqrt(p(1-p)) (GRPO-style), "mean" by p
    (MaxRL-style), "none" leaves steps unscaled (then ODRPO equals mean-centred GRPO).
    ``weights[n, K-1]`` multiply each threshold's advantage (default 1).
    """
    k_max = int(k.max()) if k.size else 2
    steps = ladder(scores, k_max) * mask[..., None]  # [n, g, K-1]
    counts = mask.sum(axis=1).astype(np.float64)[:, None]  # [n, 1]
    pass_rate = _safe_divide(steps.sum(axis=1), counts)  # [n, K-1]
    in_range = np.arange(2, k_max + 1)[None, :] <= k[:, None]
    active = (pass_rate > 0) & (pass_rate < 1) & in_range & (counts > 1)
    centered = (steps - pass_rate[:, None, :]) * mask[..., None]
    if scaling == "std":
        den = np.sqrt(pass_rate * (1 - pass_rate)) + eps
    elif scaling == "mean":
        den = pass_rate + eps
    else:
        den = np.ones_like(pass_rate)
    per_step = _safe_divide(centered, np.where(active, den, 0.0)[:, None, :])
    if weights is not None:
        per_step = per_step * weights[:, None, :]
    return per_step.sum(axis=2), pass_rate, active
