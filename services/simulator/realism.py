"""Realism of simulated user turns against real ones (held-out contexts, same history).

For each held-out real context the simulator writes the user's turn; the simulated turns are
compared with the real ones, per domain and overall:

* ``length_w1``: Wasserstein-1 distance between the word-count distributions;
* ``question_rate``: share of turns with a question mark, real and simulated;
* ``distinct_1`` / ``distinct_2``: distinct unigrams / bigrams over all of them (variety);
* ``classifier_accuracy``: a classifier two-sample test (Lopez-Paz & Oquab, ICLR 2017):
  logistic regression on sentence embeddings told to separate real from simulated turns,
  5-fold cross-validated accuracy; 0.5 means it cannot tell them apart;
* ``end``: how often the real and the simulated user end the conversation at these contexts,
  their agreement, and the dialogue length in user turns that the end rate implies (a
  constant per-turn end rate p gives 1/p turns) beside the real mean;
* ``satisfaction``: accuracy and macro-F1 of the predicted 1-5 rating against the annotators'
  (mean, rounded) beside always answering the majority level of the training turns (most
  ratings are 3, so accuracy alone rewards a predictor that always says 3; issue 24).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from services.simulator.data import UserTurnExample

Embed = Callable[[list[str]], npt.NDArray[np.float32]]
MIN_PER_CLASS = 10  # fewer turns on a side: no two-sample test
FOLDS = 5


@dataclass(frozen=True, slots=True)
class Simulated:
    """What the simulator said at one held-out context."""

    text: str
    done: bool
    satisfaction: int | None  # the predicted level (argmax), None when not predicted


def words(text: str) -> list[str]:
    return text.lower().split()


def wasserstein_1(a: Sequence[float], b: Sequence[float]) -> float:
    """W1 between two empirical distributions on the line: the area between their CDFs."""
    if not a or not b:
        return float("nan")
    xa, xb = np.sort(np.asarray(a, float)), np.sort(np.asarray(b, float))
    grid = np.sort(np.concatenate([xa, xb]))
    widths = np.diff(grid)
    cdf_a = np.searchsorted(xa, grid[:-1], side="right") / len(xa)
    cdf_b = np.searchsorted(xb, grid[:-1], side="right") / len(xb)
    return float(np.sum(np.abs(cdf_a - cdf_b) * widths))


def question_rate(texts: Sequence[str]) -> float:
    return sum("?" in t for t in texts) / len(texts) if texts else float("nan")


def distinct_n(texts: Sequence[str], n: int) -> float:
    grams = [tuple(w[i : i + n]) for w in map(words, texts) for i in range(len(w) - n + 1)]
    return len(set(grams)) / len(grams) if grams else 0.0


def classifier_accuracy(
    real: npt.NDArray[np.float32], simulated: npt.NDArray[np.float32], seed: int = 0
) -> float | None:
    """Cross-validated accuracy of telling real from simulated turns by their embeddings."""
    if min(len(real), len(simulated)) < MIN_PER_CLASS:
        return None
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold, cross_val_score

    x = np.concatenate([real, simulated]).astype(np.float64)
    y = np.concatenate([np.zeros(len(real)), np.ones(len(simulated))])
    folds = StratifiedKFold(n_splits=FOLDS, shuffle=True, random_state=seed)
    scores = cross_val_score(LogisticRegression(max_iter=2000), x, y, cv=folds)
    return float(np.mean(scores))


def macro_f1(gold: Sequence[int], guess: Sequence[int]) -> float:
    """Unweighted mean of the per-class F1 over the classes in ``gold`` or ``guess`` (a class
    never predicted scores 0): the figure for a rating task where one class dominates."""
    classes = sorted(set(gold) | set(guess))
    if not classes:
        return float("nan")
    scores = []
    for label in classes:
        hit = sum(g == label and p == label for g, p in zip(gold, guess, strict=True))
        said, real = sum(p == label for p in guess), sum(g == label for g in gold)
        scores.append(2 * hit / (said + real) if said + real else 0.0)
    return sum(scores) / len(scores)


def satisfaction_report(rated: Sequence[tuple[int, int]], majority: int) -> dict[str, Any]:
    """Accuracy and macro-F1 of (gold, predicted) levels beside always answering
    ``majority``."""
    if not rated:
        return {
            "rated": 0,
            "accuracy": None,
            "macro_f1": None,
            "majority_level": majority,
            "majority_accuracy": None,
            "majority_macro_f1": None,
        }
    gold = [g for g, _ in rated]
    guess = [p for _, p in rated]
    always = [majority] * len(gold)
    return {
        "rated": len(rated),
        "accuracy": _rate([g == p for g, p in rated]),
        "macro_f1": macro_f1(gold, guess),
        "majority_level": majority,
        "majority_accuracy": _rate([g == majority for g in gold]),
        "majority_macro_f1": macro_f1(gold, always),
    }


def _rate(flags: Sequence[bool]) -> float:
    return sum(flags) / len(flags) if flags else float("nan")


def group_report(
    items: Sequence[UserTurnExample],
    simulated: Sequence[Simulated],
    real_vectors: npt.NDArray[np.float32],
    sim_vectors: npt.NDArray[np.float32],
    real_turn_counts: Sequence[int],
    majority: int,
    seed: int,
) -> dict[str, Any]:
    real_texts = [i.text for i in items]
    sim_texts = [s.text for s in simulated]
    real_len = [len(words(t)) for t in real_texts]
    sim_len = [len(words(t)) for t in sim_texts]
    real_end = [i.is_last for i in items]
    sim_end = [s.done for s in simulated]
    sim_end_rate = _rate(sim_end)
    rated = [
        (i.satisfaction, s.satisfaction)
        for i, s in zip(items, simulated, strict=True)
        if i.satisfaction is not None and s.satisfaction is not None
    ]
    return {
        "turns": len(items),
        "length_w1": wasserstein_1(real_len, sim_len),
        "length_mean": {"real": float(np.mean(real_len)), "simulated": float(np.mean(sim_len))},
        "question_rate": {"real": question_rate(real_texts), "simulated": question_rate(sim_texts)},
        "distinct_1": {"real": distinct_n(real_texts, 1), "simulated": distinct_n(sim_texts, 1)},
        "distinct_2": {"real": distinct_n(real_texts, 2), "simulated": distinct_n(sim_texts, 2)},
        "classifier_accuracy": classifier_accuracy(real_vectors, sim_vectors, seed),
        "end": {
            "real_rate": _rate(real_end),
            "simulated_rate": sim_end_rate,
            "agreement": _rate([a == b for a, b in zip(real_end, sim_end, strict=True)]),
            "real_user_turns": float(np.mean(real_turn_counts)) if real_turn_counts else None,
            "implied_user_turns": (1 / sim_end_rate) if sim_end_rate > 0 else None,
        },
        "satisfaction": satisfaction_report(rated, majority),
    }


def report(
    items: Sequence[UserTurnExample],
    simulated: Sequence[Simulated],
    embed: Embed,
    turn_counts: dict[str, list[int]],
    majority: int,
    seed: int = 0,
) -> dict[str, Any]:
    """Per-domain and overall realism of ``simulated`` against the real ``items``."""
    real_vectors = embed([i.text for i in items])
    sim_vectors = embed([s.text or "(empty)" for s in simulated])

    def one(domain: str) -> dict[str, Any]:
        rows = [k for k, i in enumerate(items) if domain in ("all", i.domain)]
        counts = (
            [c for v in turn_counts.values() for c in v]
            if domain == "all"
            else turn_counts.get(domain, [])
        )
        return group_report(
            [items[k] for k in rows],
            [simulated[k] for k in rows],
            real_vectors[rows],
            sim_vectors[rows],
            counts,
            majority,
            seed,
        )

    return by_domain({i.domain for i in items}, one)


def by_domain(domains: set[str], group: Callable[[str], dict[str, Any]]) -> dict[str, Any]:
    """``{"domains": {name: group(name)}, "all": group("all")}``, domains in name order."""
    return {"domains": {d: group(d) for d in sorted(domains)}, "all": group("all")}
