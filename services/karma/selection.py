"""Which pairs a training run sees: sibling pairs, and optionally within-thread ranking pairs.

A CPU budget buys a few thousand pairs, so :func:`sibling_sample` spreads them: one pair per
parent first (largest score ratio: the clearest preference), then a second per parent, and so
on. :func:`ranking_pairs` is the optional within-thread ranking term, as Bradley-Terry pairs
too: two replies anywhere in one thread (any depth, any posting order) where one got at least
twice the other's score and 2 more. Unlike the sibling pairs these are confounded by
visibility (early replies collect more votes); they are what teaches the ``with_metadata``
variant what its age field means.
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass

from services.karma.data import KarmaData, Pair, prefers


@dataclass(frozen=True, slots=True)
class TrainingPair:
    """A pair and whether its inputs hide posting order (sibling pairs always do)."""

    pair: Pair
    order_blind: bool


def sibling_sample(pairs: list[Pair], limit: int | None, rng: random.Random) -> list[Pair]:
    """Up to ``limit`` pairs, round-robin over parents, clearest preference first."""
    by_parent: dict[str, list[Pair]] = defaultdict(list)
    for pair in pairs:
        by_parent[pair.preferred.parent_key].append(pair)
    parents = [by_parent[key] for key in sorted(by_parent)]
    for group in parents:
        group.sort(key=lambda p: (-(p.ratio or 0.0), p.preferred.id, p.other.id))
    rng.shuffle(parents)
    chosen: list[Pair] = []
    depth = 0
    while (limit is None or len(chosen) < limit) and any(len(g) > depth for g in parents):
        chosen.extend(g[depth] for g in parents if len(g) > depth)
        depth += 1
    chosen = chosen if limit is None else chosen[:limit]
    rng.shuffle(chosen)
    return chosen


def ranking_pairs(data: KarmaData, count: int, rng: random.Random, rounds: int = 16) -> list[Pair]:
    """Up to ``count`` within-thread pairs by :func:`prefers`, spread over threads."""
    threads = [g for _, g in sorted(data.by_thread().items()) if len(g) >= 2]
    rng.shuffle(threads)
    pairs: list[Pair] = []
    for _ in range(rounds):
        for group in threads:
            if len(pairs) >= count:
                return pairs
            a, b = rng.sample(group, 2)
            if a.score is None or b.score is None:
                continue
            if prefers(b.score, a.score):
                pairs.append(Pair(b, a))
            elif prefers(a.score, b.score):
                pairs.append(Pair(a, b))
    return pairs


def training_pairs(
    data: KarmaData, limit: int | None, rank_fraction: float, seed: int
) -> list[TrainingPair]:
    """The run's pairs: ``rank_fraction`` of them within-thread ranking pairs, the rest siblings."""
    rng = random.Random(seed)
    total = len(data.pairs) if limit is None else limit
    ranked = ranking_pairs(data, round(total * rank_fraction), rng) if rank_fraction > 0 else []
    siblings = sibling_sample(data.pairs, total - len(ranked), rng)
    chosen = [TrainingPair(p, True) for p in siblings] + [TrainingPair(p, False) for p in ranked]
    rng.shuffle(chosen)
    return chosen
