"""ODRPO and the GRPO family against hand-computed cases (METHODS.md)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from services.ordinal import estimators


def _one(scores: list[float]) -> tuple[np.ndarray, np.ndarray]:
    return np.asarray([scores], dtype=np.float64), np.ones((1, len(scores)), dtype=bool)


def test_odrpo_hand_computed_group() -> None:
    # Scores 1,3,5,5 on K=5: p_2 = p_3 = 0.75, p_4 = p_5 = 0.5.
    scores, mask = _one([1, 3, 5, 5])
    adv, rates, active = estimators.odrpo_advantages(scores, mask, np.array([5]), eps=0.0)
    s75 = math.sqrt(0.75 * 0.25)
    expected = [
        2 * (-0.75 / s75) + 2 * (-0.5 / 0.5),
        2 * (0.25 / s75) + 2 * (-0.5 / 0.5),
        2 * (0.25 / s75) + 2 * (0.5 / 0.5),
        2 * (0.25 / s75) + 2 * (0.5 / 0.5),
    ]
    np.testing.assert_allclose(adv[0], expected)
    np.testing.assert_allclose(rates[0], [0.75, 0.75, 0.5, 0.5])
    assert active[0].tolist() == [True, True, True, True]


def test_odrpo_saturated_thresholds_contribute_nothing() -> None:
    # Everyone passes 2 and nobody reaches 5: those steps carry no signal.
    scores, mask = _one([2, 3, 4, 4])
    adv, rates, active = estimators.odrpo_advantages(scores, mask, np.array([5]), eps=0.0)
    assert active[0].tolist() == [False, True, True, False]
    np.testing.assert_allclose(rates[0], [1.0, 0.75, 0.5, 0.0])
    s75 = math.sqrt(0.75 * 0.25)
    np.testing.assert_allclose(adv[0, 0], -0.75 / s75 - 0.5 / 0.5)


def test_odrpo_mean_scaling_is_maxrl_style() -> None:
    scores, mask = _one([1, 2, 2, 2])  # K=2: p = 0.75
    adv, _, _ = estimators.odrpo_advantages(scores, mask, np.array([2]), scaling="mean", eps=0.0)
    np.testing.assert_allclose(adv[0], [-0.75 / 0.75, 0.25 / 0.75, 0.25 / 0.75, 0.25 / 0.75])


def test_unscaled_odrpo_equals_mean_centred_grpo() -> None:
    rng = np.random.default_rng(7)
    scores = rng.integers(1, 11, size=(200, 16)).astype(np.float64)
    mask = np.ones_like(scores, dtype=bool)
    k = np.full(200, 10)
    odrpo, _, _ = estimators.odrpo_advantages(scores, mask, k, scaling="none")
    centred = estimators.scalar_advantages(scores, mask, "dr_grpo", eps=0.0)
    np.testing.assert_allclose(odrpo, centred, atol=1e-12)
    np.testing.assert_allclose(centred, scores - scores.mean(axis=1, keepdims=True))


@pytest.mark.parametrize("estimator", ["grpo", "maxrl", "dr_grpo"])
@pytest.mark.parametrize("scores", [[3.0], [4.0, 4.0, 4.0]])
def test_no_signal_gives_zeros_not_nan(estimator: str, scores: list[float]) -> None:
    values, mask = _one(scores)
    adv = estimators.scalar_advantages(values, mask, estimator, eps=0.0)  # type: ignore[arg-type]
    assert np.all(adv == 0.0)


@pytest.mark.parametrize("scaling", ["std", "mean", "none"])
@pytest.mark.parametrize("scores", [[3.0], [4.0, 4.0, 4.0]])
def test_odrpo_no_signal_gives_zeros(scaling: str, scores: list[float]) -> None:
    values, mask = _one(scores)
    adv, _, active = estimators.odrpo_advantages(
        values,
        mask,
        np.array([5]),
        scaling=scaling,
        eps=0.0,  # type: ignore[arg-type]
    )
    assert np.all(adv == 0.0) and not active.any()


def test_grpo_hand_computed() -> None:
    values, mask = _one([1, 2, 3])
    adv = estimators.scalar_advantages(values, mask, "grpo", eps=0.0)
    std = math.sqrt(2 / 3)
    np.testing.assert_allclose(adv[0], [-1 / std, 0.0, 1 / std])


def test_maxrl_divides_by_the_mean() -> None:
    values, mask = _one([1, 2, 3])
    adv = estimators.scalar_advantages(values, mask, "maxrl", eps=0.0)
    np.testing.assert_allclose(adv[0], [-0.5, 0.0, 0.5])


def test_padded_groups_match_groups_computed_alone() -> None:
    scores = np.array([[1, 2, 5, 0], [3, 1, 2, 2]], dtype=np.float64)
    mask = np.array([[1, 1, 1, 0], [1, 1, 1, 1]], dtype=bool)
    k = np.array([5, 3])
    adv, _, active = estimators.odrpo_advantages(scores, mask, k)
    alone, _, _ = estimators.odrpo_advantages(scores[:1, :3], mask[:1, :3], k[:1])
    np.testing.assert_allclose(adv[0, :3], alone[0])
    assert adv[0, 3] == 0.0
    # Thresholds above the second group's K=3 are inactive.
    assert active[1].tolist()[2:] == [False, False]
    grpo = estimators.scalar_advantages(scores, mask, "grpo", eps=0.0)
    alone_grpo = estimators.scalar_advantages(scores[:1, :3], mask[:1, :3], "grpo", eps=0.0)
    np.testing.assert_allclose(grpo[0, :3], alone_grpo[0])


def test_threshold_weights_scale_each_step() -> None:
    scores, mask = _one([1, 3, 5, 5])
    base, _, _ = estimators.odrpo_advantages(scores, mask, np.array([5]), scaling="none")
    weights = np.array([[1.0, 0.0, 0.0, 0.0]])
    only_first, _, _ = estimators.odrpo_advantages(
        scores, mask, np.array([5]), scaling="none", weights=weights
    )
    np.testing.assert_allclose(only_first[0], [-0.75, 0.25, 0.25, 0.25])
    assert not np.allclose(base, only_first)


def test_ladder_matches_definition() -> None:
    steps = estimators.ladder(np.array([1.0, 3.0, 5.0]), 5)
    assert steps.astype(int).tolist() == [[0, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 1]]
