"""Realism over whole dialogues (issue 24): the per-turn figures of
:mod:`services.simulator.realism` judge one turn at a real context; a user simulator is used to
play whole episodes, where what matters is how long users stay, how varied their openings are,
how often they leave, and whether a whole conversation reads like a real one.

For each domain, real held-out dialogues and simulated ones (the simulator against an
assistant model, at most ``max_turns`` user turns; a real dialogue longer than that is cut
there and counts as not ended) are compared on:

* ``user_turns``: the mean number of user turns and the Wasserstein-1 distance between the two
  distributions;
* ``ended``: the share of dialogues the user ended within ``max_turns``;
* ``first_turn``: distinct-1 / distinct-2 of the opening messages and their mean pairwise
  cosine similarity (lower: more varied openings);
* ``classifier_accuracy``: the two-sample classifier test of :mod:`~services.simulator.realism`
  on whole dialogues (the embedding of the user's turns joined), 0.5 when it cannot tell.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from services.simulator.realism import (
    Embed,
    by_domain,
    classifier_accuracy,
    distinct_n,
    wasserstein_1,
)


@dataclass(frozen=True, slots=True)
class WholeDialogue:
    """The user's side of one dialogue."""

    domain: str
    user_turns: tuple[str, ...]
    ended: bool  # the user ended it (False: it stopped at the turn limit)


def cut(domain: str, user_turns: Sequence[str], max_turns: int) -> WholeDialogue:
    """A real dialogue as the simulated ones are bounded: at most ``max_turns`` user turns."""
    return WholeDialogue(domain, tuple(user_turns[:max_turns]), len(user_turns) <= max_turns)


def mean_pairwise_similarity(vectors: npt.NDArray[np.float32]) -> float | None:
    """Mean cosine similarity over all pairs of distinct rows (rows are normalised here)."""
    n = len(vectors)
    if n < 2:
        return None
    unit = vectors.astype(np.float64)
    unit /= np.maximum(np.linalg.norm(unit, axis=1, keepdims=True), 1e-12)
    total = unit.sum(axis=0)
    return float((total @ total - n) / (n * (n - 1)))


def _side(dialogues: Sequence[WholeDialogue], first: npt.NDArray[np.float32]) -> dict[str, Any]:
    counts = [len(d.user_turns) for d in dialogues]
    openings = [d.user_turns[0] if d.user_turns else "" for d in dialogues]
    return {
        "dialogues": len(dialogues),
        "mean_user_turns": float(np.mean(counts)) if counts else None,
        "ended": sum(d.ended for d in dialogues) / len(dialogues) if dialogues else None,
        "first_distinct_1": distinct_n(openings, 1),
        "first_distinct_2": distinct_n(openings, 2),
        "first_similarity": mean_pairwise_similarity(first),
    }


def group_report(
    real: Sequence[WholeDialogue],
    simulated: Sequence[WholeDialogue],
    vectors: tuple[npt.NDArray[np.float32], ...],
    seed: int,
) -> dict[str, Any]:
    """``vectors``: real openings, simulated openings, real whole, simulated whole."""
    real_first, sim_first, real_whole, sim_whole = vectors
    return {
        "real": _side(real, real_first),
        "simulated": _side(simulated, sim_first),
        "user_turns_w1": wasserstein_1(
            [len(d.user_turns) for d in real], [len(d.user_turns) for d in simulated]
        ),
        "classifier_accuracy": classifier_accuracy(real_whole, sim_whole, seed),
    }


def whole_text(dialogue: WholeDialogue) -> str:
    return "\n".join(dialogue.user_turns) or "(empty)"


def dialogue_report(
    real: Sequence[WholeDialogue],
    simulated: Sequence[WholeDialogue],
    embed: Embed,
    max_turns: int,
    seed: int = 0,
) -> dict[str, Any]:
    """Per-domain and overall whole-dialogue realism of ``simulated`` against ``real``."""
    both = [*real, *simulated]
    first = embed([d.user_turns[0] if d.user_turns else "(empty)" for d in both])
    whole = embed([whole_text(d) for d in both])
    is_real = np.asarray([k < len(real) for k in range(len(both))])

    def one(domain: str) -> dict[str, Any]:
        mine = np.asarray([domain in ("all", d.domain) for d in both])
        r, s = mine & is_real, mine & ~is_real
        return group_report(
            [d for d, m in zip(both, r, strict=True) if m],
            [d for d, m in zip(both, s, strict=True) if m],
            (first[r], first[s], whole[r], whole[s]),
            seed,
        )

    return {"max_turns": max_turns, **by_domain({d.domain for d in both}, one)}
