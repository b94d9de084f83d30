"""Group diversity metrics on unit-normalized embeddings (pure numpy, no I/O). See PPR-GDE."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

import numpy as np
import numpy.typing as npt

Matrix = npt.NDArray[np.float32]
Vector = npt.NDArray[np.float64]
Metric = Literal["centroid", "pairwise_cosine"]
Scaling = Literal["minmax", "none"]

_TOKEN = re.compile(r"\w+|[^\w\s]", re.UNICODE)


def centroid_distances(embeddings: Matrix) -> Vector:
    """d_i = ||e_i - centroid|| (PPR-GDE's group diversity)."""
    e = embeddings.astype(np.float64)
    distances: Vector = np.linalg.norm(e - e.mean(axis=0, keepdims=True), axis=1)
    return distances


def cosine_distance_matrix(embeddings: Matrix) -> npt.NDArray[np.float64]:
    """1 - cos(e_i, e_j), clipped to [0, 2] against rounding."""
    e = embeddings.astype(np.float64)
    norms = np.linalg.norm(e, axis=1, keepdims=True)
    unit = np.divide(e, norms, out=np.zeros_like(e), where=norms > 0)
    distances: npt.NDArray[np.float64] = np.clip(1.0 - unit @ unit.T, 0.0, 2.0)
    return distances


def mean_pairwise_distances(distances: npt.NDArray[np.float64]) -> Vector:
    """Each completion's mean cosine distance to the others."""
    g = distances.shape[0]
    means: Vector = distances.sum(axis=1) / max(g - 1, 1)
    return means


def mean_pairwise_cosine_distance(distances: npt.NDArray[np.float64]) -> float:
    """The group's mean over unordered pairs i < j."""
    g = distances.shape[0]
    if g < 2:
        return 0.0
    upper = distances[np.triu_indices(g, k=1)]
    return float(upper.mean())


def scale(values: Vector, scaling: Scaling, min_range: float) -> Vector:
    """Min-max within the group (all 0 when the range is under ``min_range``), or unchanged.

    Min-max always yields a 0 and a 1, even among near-copies; ``min_range`` is the floor that
    stops it from stretching noise (METHODS.md, PPR-GDE caveat).
    """
    if scaling == "none":
        return values.copy()
    low, high = float(values.min()), float(values.max())
    if high - low < max(min_range, 1e-12):
        return np.zeros_like(values)
    return (values - low) / (high - low)


def raw_diversity(embeddings: Matrix, metric: Metric) -> Vector:
    """Unscaled per-completion diversity under ``metric``."""
    if metric == "centroid":
        return centroid_distances(embeddings)
    return mean_pairwise_distances(cosine_distance_matrix(embeddings))


def tokens(text: str) -> list[str]:
    """Lower-cased word and punctuation tokens."""
    return _TOKEN.findall(text.lower())


def distinct_n(texts: Sequence[str], n: int) -> float:
    """Distinct n-grams over all n-grams in the group (0 when there are none)."""
    grams: list[tuple[str, ...]] = []
    for text in texts:
        toks = tokens(text)
        grams.extend(tuple(toks[i : i + n]) for i in range(len(toks) - n + 1))
    return len(set(grams)) / len(grams) if grams else 0.0
