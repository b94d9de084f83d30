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

    Cost is O(n * (g + K)), not O(n * g * K): a completion's advantage depends only on its
    level, so one table per group, A(r) = sum_{k <= r} c_k - sum_k p_k c_k with
    c_k = w_k * active_k / den_k, is built from a histogram and then gathered.
    """
    n, _ = scores.shape
    k_max = int(k.max()) if k.size else 2
    levels = np.where(mask, scores, 0).astype(np.int64)
    counts = _level_histogram(levels, mask, k_max)  # [n, K+1], column r counts level r
    size = mask.sum(axis=1).astype(np.float64)
    at_least = np.cumsum(counts[:, ::-1], axis=1)[:, ::-1]  # at_least[:, r] = #(level >= r)
    pass_rate = _safe_divide(at_least[:, 2:].astype(np.float64), size[:, None])  # [n, K-1]
    in_range = np.arange(2, k_max + 1)[None, :] <= k[:, None]
    active = (pass_rate > 0) & (pass_rate < 1) & in_range & (size[:, None] > 1)
    coef = _safe_divide(
        np.ones_like(pass_rate), np.where(active, _step_den(pass_rate, scaling, eps), 0.0)
    )
    if weights is not None:
        coef = coef * weights
    table = np.zeros((n, k_max + 1), dtype=np.float64)  # table[:, r] for levels r = 0..K
    table[:, 2:] = np.cumsum(coef, axis=1)
    table -= (pass_rate * coef).sum(axis=1, keepdims=True)
    advantages = np.take_along_axis(table, levels, axis=1) * mask
    return advantages, pass_rate, active


def _level_histogram(
    levels: npt.NDArray[np.int64], mask: BoolArray, k_max: int
) -> npt.NDArray[np.int64]:
    n = levels.shape[0]
    flat = (np.arange(n)[:, None] * (k_max + 1) + levels)[mask]
    return np.bincount(flat, minlength=n * (k_max + 1)).reshape(n, k_max + 1)


def _step_den(pass_rate: FloatArray, scaling: StepScaling, eps: float) -> FloatArray:
    if scaling == "std":
        return np.sqrt(pass_rate * (1 - pass_rate)) + eps
    if scaling == "mean":
        return pass_rate + eps
    return np.ones_like(pass_rate)
