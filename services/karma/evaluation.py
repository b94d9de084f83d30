"""How well a KARMA model predicts karma, beside the baselines that any model must beat.

- pair accuracy on sibling pairs (a tie counts half), also per score-ratio bin: how many times
  more votes the preferred reply got, as the SHP data card recommends (larger ratios are the
  clearer preferences), and on the length-matched pairs (the two replies within 20% of each
  other's length), where length cannot win for the model (issue 24);
- Spearman correlation within each thread over all its scored replies, averaged over threads;
- baselines: the longer reply wins (computed from the data), and random (50%, Spearman 0).

Pairs are scored order-blind (no posting-time fields); the within-thread ranking shows every
field, because that is where metadata is measured (see features.py).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import numpy as np

from services.karma.data import KarmaData, Pair, Reply
from services.karma.features import KarmaInput, from_reply

#: Score-ratio bin edges: [2, 3), [3, 5), [5, 10), [10, inf).
RATIO_EDGES = (2.0, 3.0, 5.0, 10.0)
#: Two replies are length-matched when they differ by at most this share of the longer one.
LENGTH_TOLERANCE = 0.2
ProgressFn = Callable[[int, int, str], None]
_T = TypeVar("_T")


class Scorer(Protocol):
    """Anything that scores inputs in batches, such as a loaded ``KarmaModel``."""

    def score_inputs(self, inputs: Sequence[KarmaInput], *, order_blind: bool) -> list[float]: ...


# --- the math ---------------------------------------------------------------------------------


def pair_accuracy(preferred: Sequence[float], other: Sequence[float]) -> float:
    """Share of pairs where the preferred reply scored higher; a tie counts half.

    >>> pair_accuracy([2.0, 1.0, 0.5], [1.0, 3.0, 0.5])
    0.5
    """
    a, b = np.asarray(preferred, dtype=float), np.asarray(other, dtype=float)
    if a.size == 0:
        return float("nan")
    return float(np.mean((a > b) + 0.5 * (a == b)))


def accuracy_by_ratio(
    preferred: Sequence[float],
    other: Sequence[float],
    ratios: Sequence[float | None],
    edges: Sequence[float] = RATIO_EDGES,
) -> list[dict[str, Any]]:
    """Pair accuracy per score-ratio bin ``[edges[i], edges[i+1])``, the last bin open."""
    bins = []
    bounds = [*edges, float("inf")]
    for low, high in itertools.pairwise(bounds):
        chosen = [i for i, r in enumerate(ratios) if r is not None and low <= r < high]
        label = f"[{low:g}, {high:g})" if high != float("inf") else f">= {low:g}"
        bins.append(
            {
                "bin": label,
                "pairs": len(chosen),
                "accuracy": pair_accuracy(
                    [preferred[i] for i in chosen], [other[i] for i in chosen]
                )
                if chosen
                else None,
            }
        )
    return bins


def length_matched(a: str, b: str, tolerance: float = LENGTH_TOLERANCE) -> bool:
    """Whether two replies are within ``tolerance`` of each other's length (characters), where
    the longer-reply baseline is near chance (issue 24).

    >>> length_matched("x" * 100, "y" * 81), length_matched("x" * 100, "y" * 79)
    (True, False)
    """
    longer = max(len(a), len(b))
    return longer == 0 or abs(len(a) - len(b)) <= tolerance * longer


def subset_accuracy(
    preferred: Sequence[float], other: Sequence[float], keep: Sequence[bool]
) -> dict[str, Any]:
    """Pair accuracy on the pairs where ``keep`` is true (None when there are none)."""
    chosen = [i for i, k in enumerate(keep) if k]
    accuracy = (
        pair_accuracy([preferred[i] for i in chosen], [other[i] for i in chosen])
        if chosen
        else None
    )
    return {"pairs": len(chosen), "accuracy": accuracy}


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's rho (average ranks for ties); None when either side is constant."""
    if len(x) < 2:
        return None
    rx, ry = _ranks(x), _ranks(y)
    if np.all(rx == rx[0]) or np.all(ry == ry[0]):
        return None
    return float(np.corrcoef(rx, ry)[0, 1])


def _ranks(values: Sequence[float]) -> np.ndarray[Any, np.dtype[np.float64]]:
    array = np.asarray(values, dtype=float)
    order = np.argsort(array, kind="mergesort")
    ranks = np.empty(len(array), dtype=float)
    sorted_values = array[order]
    start = 0
    while start < len(array):
        end = start
        while end + 1 < len(array) and sorted_values[end + 1] == sorted_values[start]:
            end += 1
        ranks[order[start : end + 1]] = (start + end) / 2 + 1
        start = end + 1
    return ranks


def within_thread_spearman(
    groups: Iterable[tuple[Sequence[float], Sequence[float]]],
) -> dict[str, Any]:
    """Mean over threads of Spearman(predicted, actual); threads where it is undefined skipped."""
    values, replies, skipped = [], 0, 0
    for predicted, actual in groups:
        rho = spearman(predicted, actual)
        if rho is None:
            skipped += 1
            continue
        values.append(rho)
        replies += len(actual)
    return {
        "mean": float(np.mean(values)) if values else None,
        "threads": len(values),
        "replies": replies,
        "skipped_threads": skipped,
    }


# --- evaluating a model on data ---------------------------------------------------------------


@dataclass(frozen=True)
class EvalOptions:
    """``max_pairs``/``spearman_threads``: a seeded sample (None: all); tune on dev with fewer."""

    max_pairs: int | None = None
    spearman_threads: int | None = 300
    max_per_thread: int = 50
    min_thread_replies: int = 3
    seed: int = 0
    chunk: int = 128


def evaluate(
    scorer: Scorer,
    data: KarmaData,
    options: EvalOptions | None = None,
    progress: ProgressFn | None = None,
) -> dict[str, Any]:
    """Pair accuracy (order-blind), per-bin accuracy, within-thread Spearman, and baselines."""
    options = options or EvalOptions()
    pairs = _sample(data.pairs, options.max_pairs, options.seed)
    threads = spearman_threads(data, options)
    pair_replies = list({r.id: r for p in pairs for r in (p.preferred, p.other)}.values())
    rank_replies = [r for group in threads for r in group]
    total = len(pair_replies) + len(rank_replies)
    report = _Progress(progress, total)
    pair_scores = _score(scorer, pair_replies, True, options.chunk, report)
    rank_scores = _score(scorer, rank_replies, False, options.chunk, report)
    result = pair_metrics(pairs, pair_scores)
    result["spearman"] = _thread_spearman(threads, rank_scores)
    result["baselines"] = baselines(pairs, threads)
    result["split"] = data.source
    return result


def pair_metrics(pairs: Sequence[Pair], scores: dict[str, float]) -> dict[str, Any]:
    """Accuracy and per-bin accuracy of scores keyed by reply id."""
    preferred = [scores[p.preferred.id] for p in pairs]
    other = [scores[p.other.id] for p in pairs]
    matched = [length_matched(p.preferred.text, p.other.text) for p in pairs]
    return {
        "pairs": len(pairs),
        "pair_accuracy": pair_accuracy(preferred, other),
        "ties": int(sum(a == b for a, b in zip(preferred, other, strict=True))),
        "by_ratio": accuracy_by_ratio(preferred, other, [p.ratio for p in pairs]),
        "length_matched": subset_accuracy(preferred, other, matched),
    }


def baselines(pairs: Sequence[Pair], threads: Sequence[Sequence[Reply]]) -> dict[str, Any]:
    """The longer reply wins (characters), and random, on the same pairs and threads."""
    lengths = {r.id: float(len(r.text)) for p in pairs for r in (p.preferred, p.other)}
    length = pair_metrics(pairs, lengths)
    length["spearman"] = within_thread_spearman(
        ([float(len(r.text)) for r in group], [r.score or 0.0 for r in group]) for group in threads
    )
    random_baseline = {"pair_accuracy": 0.5, "spearman": 0.0, "note": "expected value"}
    return {"length": length, "random": random_baseline}


def spearman_threads(data: KarmaData, options: EvalOptions) -> list[list[Reply]]:
    """A seeded sample of threads with enough distinct scores, each capped at max_per_thread."""
    rng = random.Random(options.seed)
    groups = [g for _, g in sorted(data.by_thread().items())]
    groups = [g for g in groups if len({r.score for r in g}) >= 2]
    groups = [g for g in groups if len(g) >= options.min_thread_replies]
    rng.shuffle(groups)
    if options.spearman_threads is not None:
        groups = groups[: options.spearman_threads]
    return [
        rng.sample(g, options.max_per_thread) if len(g) > options.max_per_thread else g
        for g in groups
    ]


def _thread_spearman(threads: Sequence[Sequence[Reply]], scores: dict[str, float]) -> Any:
    return within_thread_spearman(
        ([scores[r.id] for r in group], [r.score or 0.0 for r in group]) for group in threads
    )


def _sample(items: Sequence[_T], limit: int | None, seed: int) -> list[_T]:
    if limit is None or len(items) <= limit:
        return list(items)
    return random.Random(seed).sample(list(items), limit)


class _Progress:
    def __init__(self, callback: ProgressFn | None, total: int) -> None:
        self.callback, self.total, self.done = callback, total, 0

    def advance(self, count: int) -> None:
        self.done += count
        if self.callback is not None:
            self.callback(self.done, self.total, "evaluate")


def _score(
    scorer: Scorer, replies: Sequence[Reply], order_blind: bool, chunk: int, report: _Progress
) -> dict[str, float]:
    scores: dict[str, float] = {}
    for start in range(0, len(replies), chunk):
        part = replies[start : start + chunk]
        values = scorer.score_inputs([from_reply(r) for r in part], order_blind=order_blind)
        scores.update(zip((r.id for r in part), values, strict=True))
        report.advance(len(part))
    return scores
