"""From judged pairs to per-completion rewards (pure functions). See PPR-GDE in METHODS.md.

A judged pair is ``PairOutcome(i, j, p_i, winner)`` where ``p_i`` is P(i better) averaged over
both orders and ``winner`` is ``"a"`` (i), ``"b"`` (j), ``"tie"`` or None (not judged).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from services.judge.pairing import ANCHOR

Scoring = Literal["pprgde", "win_rate", "bradley_terry"]
Winner = Literal["a", "b", "tie"]


@dataclass(frozen=True)
class PairOutcome:
    i: int
    j: int
    p_i: float | None
    winner: Winner | None

    @property
    def judged(self) -> bool:
        return self.winner is not None


@dataclass(frozen=True)
class GroupScores:
    rewards: list[float | None]
    tie_mask: list[bool]
    judged_pairs: list[int]


def _members(outcomes: Sequence[PairOutcome], g: int) -> list[list[PairOutcome]]:
    by_completion: list[list[PairOutcome]] = [[] for _ in range(g)]
    for o in outcomes:
        for index in (o.i, o.j):
            if index != ANCHOR:
                by_completion[index].append(o)
    return by_completion


def pprgde_scores(
    outcomes: Sequence[PairOutcome],
    g: int,
    *,
    truncated: Sequence[bool] | None = None,
    lengths: Sequence[float] | None = None,
    length_discount: bool = False,
) -> GroupScores:
    """PPR-GDE's rule: +1 / -1 on a swap-consistent win, 0 on a tie, -1 for a truncated winner.

    With ``length_discount`` a winner's +1 becomes shortest winner's length / own length.
    A completion in several pairs (round robin, anchor) gets the mean over its pairs, so the
    scale stays in [-1, 1]. A completion none of whose pairs were judged gets None.
    """
    truncated = truncated or [False] * g
    per_pair: list[list[float]] = [[] for _ in range(g)]
    ties: list[list[bool]] = [[] for _ in range(g)]
    winners: set[int] = set()
    for o in outcomes:
        if not o.judged:
            continue
        for index, side in ((o.i, "a"), (o.j, "b")):
            if index == ANCHOR:
                continue
            if o.winner == "tie":
                value = 0.0
            elif o.winner == side:
                value = -1.0 if truncated[index] else 1.0
                if not truncated[index]:
                    winners.add(index)
            else:
                value = -1.0
            per_pair[index].append(value)
            ties[index].append(o.winner == "tie")
    if length_discount and lengths is not None and winners:
        shortest = min(lengths[w] for w in winners)
        for w in winners:
            factor = shortest / lengths[w] if lengths[w] > 0 else 1.0
            per_pair[w] = [v * factor if v > 0 else v for v in per_pair[w]]
    rewards = [sum(v) / len(v) if v else None for v in per_pair]
    tie_mask = [bool(t) and all(t) for t in ties]
    return GroupScores(rewards, tie_mask, [len(v) for v in per_pair])


def win_rate_scores(outcomes: Sequence[PairOutcome], g: int) -> GroupScores:
    """Share of judged pairs won (a tie counts half), in [0, 1]."""
    members = _members(outcomes, g)
    rewards: list[float | None] = []
    tie_mask: list[bool] = []
    judged_counts: list[int] = []
    for index, pairs in enumerate(members):
        judged = [o for o in pairs if o.judged]
        judged_counts.append(len(judged))
        if not judged:
            rewards.append(None)
            tie_mask.append(False)
            continue
        wins = sum(_won(o, index) for o in judged)
        rewards.append(wins / len(judged))
        tie_mask.append(all(o.winner == "tie" for o in judged))
    return GroupScores(rewards, tie_mask, judged_counts)


def _won(o: PairOutcome, index: int) -> float:
    if o.winner == "tie":
        return 0.5
    return 1.0 if (o.winner == "a") == (o.i == index) else 0.0


def bradley_terry_scores(
    outcomes: Sequence[PairOutcome], g: int, *, prior: float = 0.5, iterations: int = 200
) -> GroupScores:
    """Bradley-Terry log-strengths from the soft outcomes P(i better), centred to mean 0.

    Fitted by the minorize-maximize updates (Hunter, 2004) with ``prior`` virtual ties
    against every other completion, so a completion that won everything stays finite.
    The anchor, when present, is one more player whose strength is fitted but not returned.
    """
    players = g + (1 if any(ANCHOR in (o.i, o.j) for o in outcomes) else 0)
    slot = [o for o in outcomes if o.judged and o.p_i is not None]

    def pos(index: int) -> int:
        return g if index == ANCHOR else index

    wins = [[prior / 2 if a != b else 0.0 for b in range(players)] for a in range(players)]
    for o in slot:
        a, b = pos(o.i), pos(o.j)
        p = float(o.p_i)  # type: ignore[arg-type]
        wins[a][b] += p
        wins[b][a] += 1 - p
    strength = [1.0] * players
    for _ in range(iterations):
        strength = _mm_step(wins, strength)
    logs = [math.log(s) for s in strength[:g]]
    judged = [0] * g
    for o in slot:
        for index in (o.i, o.j):
            if index != ANCHOR:
                judged[index] += 1
    centre = sum(logs[i] for i in range(g) if judged[i]) / max(1, sum(1 for c in judged if c))
    rewards = [logs[i] - centre if judged[i] else None for i in range(g)]
    return GroupScores(rewards, [False] * g, judged)


def _mm_step(wins: list[list[float]], strength: list[float]) -> list[float]:
    n = len(strength)
    new = []
    for a in range(n):
        total_wins = sum(wins[a])
        denom = sum(
            (wins[a][b] + wins[b][a]) / (strength[a] + strength[b]) for b in range(n) if b != a
        )
        new.append(total_wins / denom if denom > 0 else strength[a])
    geo = math.exp(sum(math.log(s) for s in new) / n)
    return [s / geo for s in new]


def score_group(
    scoring: Scoring,
    outcomes: Sequence[PairOutcome],
    g: int,
    *,
    truncated: Sequence[bool] | None = None,
    lengths: Sequence[float] | None = None,
    length_discount: bool = False,
) -> GroupScores:
    """Dispatch to the chosen scoring rule."""
    if scoring == "pprgde":
        return pprgde_scores(
            outcomes, g, truncated=truncated, lengths=lengths, length_discount=length_discount
        )
    if scoring == "win_rate":
        return win_rate_scores(outcomes, g)
    return bradley_terry_scores(outcomes, g)
