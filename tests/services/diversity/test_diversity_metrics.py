"""Diversity metrics on hand-made embeddings."""

from __future__ import annotations

import math

import numpy as np
import pytest

from services.diversity import metrics


def test_centroid_distance_hand_computed() -> None:
    e = np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32)
    d = metrics.centroid_distances(e)
    np.testing.assert_allclose(d, [math.sqrt(0.5), math.sqrt(0.5)], rtol=1e-6)


def test_pairwise_cosine_hand_computed() -> None:
    e = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]], dtype=np.float32)
    dist = metrics.cosine_distance_matrix(e)
    np.testing.assert_allclose(dist, [[0, 1, 2], [1, 0, 1], [2, 1, 0]], atol=1e-7)
    np.testing.assert_allclose(metrics.mean_pairwise_distances(dist), [1.5, 1.0, 1.5])
    assert metrics.mean_pairwise_cosine_distance(dist) == pytest.approx(4 / 3)


def test_minmax_maps_to_unit_range_and_none_keeps_values() -> None:
    values = np.array([0.2, 0.4, 0.6])
    np.testing.assert_allclose(metrics.scale(values, "minmax", 1e-6), [0.0, 0.5, 1.0])
    np.testing.assert_allclose(metrics.scale(values, "none", 1e-6), values)


def test_identical_embeddings_give_zeros_without_division_by_zero() -> None:
    e = np.tile(np.array([[0.6, 0.8]], dtype=np.float32), (4, 1))
    raw = metrics.raw_diversity(e, "centroid")
    assert np.all(raw == 0.0)
    with np.errstate(all="raise"):
        assert np.all(metrics.scale(raw, "minmax", 0.0) == 0.0)
    assert np.all(metrics.scale(raw, "none", 0.0) == 0.0)


def test_min_range_floor_stops_stretching_near_copies() -> None:
    values = np.array([0.010, 0.011, 0.012])
    assert np.all(metrics.scale(values, "minmax", 0.05) == 0.0)
    assert metrics.scale(values, "minmax", 1e-6).max() == pytest.approx(1.0)


def test_distinct_n_hand_computed() -> None:
    texts = ["the cat sat", "the cat ran"]
    assert metrics.distinct_n(texts, 1) == pytest.approx(4 / 6)
    assert metrics.distinct_n(texts, 2) == pytest.approx(3 / 4)
    assert metrics.distinct_n(["", ""], 2) == 0.0
