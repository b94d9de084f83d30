"""Turning request scores into integer levels 1..K, with errors that name the field."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from services.core.errors import InvalidInput


def check_bin_edges(edges: Sequence[float], param: str = "bin_edges") -> None:
    if not 1 <= len(edges) <= 99:
        raise InvalidInput("bin_edges needs 1 to 99 edges (K = len(edges) + 1)", param=param)
    if any(not math.isfinite(e) for e in edges):
        raise InvalidInput("bin_edges must be finite numbers", param=param)
    if any(b <= a for a, b in itertools.pairwise(edges)):
        raise InvalidInput("bin_edges must be strictly increasing", param=param)


def bin_scores(scores: npt.ArrayLike, edges: Sequence[float]) -> npt.NDArray[np.int64]:
    """Level = 1 + the number of edges at or below the score."""
    idx = np.searchsorted(np.asarray(edges, dtype=np.float64), scores, side="right")
    return np.asarray(idx, dtype=np.int64) + 1


def resolve_k(group_k: int | None, request_k: int | None, edges: Sequence[float] | None) -> int:
    """The scale of one group: bin edges fix it, else the group's or the request's K."""
    if edges is not None:
        implied = len(edges) + 1
        for given in (group_k, request_k):
            if given is not None and given != implied:
                raise InvalidInput(
                    f"k={given} contradicts bin_edges, which define K={implied}", param="k"
                )
        return implied
    k = group_k if group_k is not None else request_k
    if k is None:
        raise InvalidInput("k is required: give it per request or per group", param="k")
    return k


def integer_levels(
    scores: Sequence[float], k: int, edges: Sequence[float] | None, param: str
) -> npt.NDArray[np.int64]:
    """Validate scores against 1..K (or bin them) and return integer levels."""
    values = np.asarray(scores, dtype=np.float64)
    bad = ~np.isfinite(values)
    if bad.any():
        raise InvalidInput("scores must be finite numbers", param=f"{param}[{_first(bad)}]")
    if edges is not None:
        return bin_scores(values, edges)
    fractional = values != np.round(values)
    if fractional.any():
        j = _first(fractional)
        raise InvalidInput(
            f"score {values[j]:g} is not an integer level: non-integer scores need explicit "
            "bin_edges (for example [2.5, 5.0, 7.5] for K=4)",
            param=f"{param}[{j}]",
        )
    outside = (values < 1) | (values > k)
    if outside.any():
        j = _first(outside)
        raise InvalidInput(f"score {values[j]:g} is outside 1..{k}", param=f"{param}[{j}]")
    return values.astype(np.int64)


def _first(flags: npt.NDArray[np.bool_]) -> int:
    return int(np.flatnonzero(flags)[0])
