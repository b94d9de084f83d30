"""Which pairs of a group's completions get judged (pure functions).

PPR-GDE pairs neighbours (0, 1), (2, 3), ...; all pairs (round robin) and pairs against an
anchor response give lower-variance rewards at a higher judge cost (METHODS.md).
"""

from __future__ import annotations

import itertools
import random
from typing import Literal

Pairing = Literal["adjacent", "round_robin", "anchor"]
ANCHOR = -1  #: index standing for the anchor response in an ``anchor`` pairing


def adjacent_pairs(g: int) -> list[tuple[int, int]]:
    """(0, 1), (2, 3), ...; with an odd G the last completion is paired with the first."""
    pairs = [(i, i + 1) for i in range(0, g - 1, 2)]
    if g % 2 == 1 and g > 1:
        pairs.append((g - 1, 0))
    return pairs


def round_robin_pairs(g: int, budget: int | None = None, seed: int = 0) -> list[tuple[int, int]]:
    """Every unordered pair, or a seeded random subset of ``budget`` of them.

    The subset is drawn so that every completion appears at least once when the budget allows
    (budget >= ceil(G / 2)), which keeps every completion scored.
    """
    every = list(itertools.combinations(range(g), 2))
    if budget is None or budget >= len(every):
        return every
    rng = random.Random(seed)
    order = list(range(g))
    rng.shuffle(order)
    chosen = {(min(p), max(p)) for p in adjacent_pairs_of(order)}
    rest = [p for p in every if p not in chosen]
    rng.shuffle(rest)
    picked = sorted(chosen)[:budget] + rest[: max(0, budget - len(chosen))]
    return sorted(picked)


def adjacent_pairs_of(order: list[int]) -> list[tuple[int, int]]:
    """Adjacent pairs over an arbitrary ordering of indices."""
    return [(order[a], order[b]) for a, b in adjacent_pairs(len(order))]


def anchor_pairs(g: int) -> list[tuple[int, int]]:
    """Each completion against the anchor (index :data:`ANCHOR`)."""
    return [(i, ANCHOR) for i in range(g)]


def make_pairs(
    pairing: Pairing, g: int, *, budget: int | None = None, seed: int = 0
) -> list[tuple[int, int]]:
    """The pairs of a group of ``g`` completions under ``pairing``."""
    if pairing == "adjacent":
        return adjacent_pairs(g)
    if pairing == "round_robin":
        return round_robin_pairs(g, budget, seed)
    return anchor_pairs(g)
