"""Deterministic, varied completions for the benchmarks (no data set download)."""

from __future__ import annotations

import random

_SUBJECTS = ["The model", "A careful solver", "This answer", "The assistant", "Our proof", "It"]
_VERBS = ["computes", "argues", "shows", "estimates", "checks", "explains", "derives"]
_OBJECTS = [
    "the integral by parts",
    "that the series converges",
    "the capital of France",
    "a bound on the error",
    "why the loop terminates",
    "the expected reward",
    "the gradient of the loss",
    "a counterexample",
    "the shortest path",
    "the final answer 42",
]
_TAILS = ["step by step.", "in two lines.", "with a table.", "using induction.", "carefully.", ""]


def completions(n: int, seed: int = 0, sentences: int = 3) -> list[str]:
    """``n`` distinct completions of a few sentences each."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        parts = [
            " ".join(rng.choice(words) for words in (_SUBJECTS, _VERBS, _OBJECTS, _TAILS))
            for _ in range(sentences)
        ]
        out.append(f"[{seed}-{i}] " + " ".join(parts))
    return out
