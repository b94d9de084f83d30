"""Retrieval from the memory in AMARIS's two channels, under a budget (pure).

*Static*: the records of the last N steps (step summaries and rubric updates), newest first,
so the editor always sees where the run has just been. *Dynamic*: the records most similar to
the current step's summary by embedding (cosine of unit vectors), so an old step that looked
like this one comes back. Both share one budget in characters of record text (what the
editor's prompt can hold), static first; a record is taken once (by id) and a record whose
text is a near-duplicate of one already taken (cosine >= ``dedup``) is skipped::

    chosen = select(static, rank(query, pool, top=6), budget=2400, dedup=0.95)
    chosen.static, chosen.dynamic   # lists of Hit (record, score)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class Candidate:
    """A record as retrieval sees it."""

    id: str
    kind: str
    step: int | None
    text: str
    embedding: Sequence[float] | None = None


@dataclass(frozen=True)
class Hit:
    record: Candidate
    score: float | None = None


@dataclass
class Selection:
    static: list[Hit] = field(default_factory=list)
    dynamic: list[Hit] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    """Why each left-out record was left out (``duplicate``, ``near_duplicate``, ``budget``)."""

    @property
    def used(self) -> int:
        return sum(len(h.record.text) for h in [*self.static, *self.dynamic])


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity (0.0 when either vector is zero).

    >>> round(cosine([1.0, 0.0], [1.0, 1.0]), 4)
    0.7071
    """
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    norm = float(np.linalg.norm(x) * np.linalg.norm(y))
    return float(x @ y) / norm if norm > 0 else 0.0


def rank(query: Sequence[float], pool: Sequence[Candidate], *, top: int) -> list[Hit]:
    """The ``top`` records of ``pool`` most similar to ``query`` (ties: the newer step first)."""
    scored = [Hit(c, cosine(query, c.embedding)) for c in pool if c.embedding is not None]
    scored.sort(key=lambda h: (-(h.score or 0.0), -(h.record.step or 0), h.record.id))
    return scored[:top]


def select(
    static: Sequence[Candidate], dynamic: Sequence[Hit], *, budget: int, dedup: float
) -> Selection:
    """Static then dynamic records, each once, no near-duplicates, within ``budget`` chars."""
    out = Selection()
    taken: list[Candidate] = []
    room = budget
    for channel, hits in (("static", [Hit(c) for c in static]), ("dynamic", list(dynamic))):
        for hit in hits:
            why = _refusal(hit.record, taken, room, dedup)
            if why is not None:
                out.skipped.setdefault(hit.record.id, why)
                continue
            taken.append(hit.record)
            room -= len(hit.record.text)
            (out.static if channel == "static" else out.dynamic).append(hit)
    return out


def _refusal(record: Candidate, taken: Sequence[Candidate], room: int, dedup: float) -> str | None:
    if any(t.id == record.id for t in taken):
        return "duplicate"
    for other in taken:
        if other.text.strip() == record.text.strip():
            return "near_duplicate"
        both = record.embedding is not None and other.embedding is not None
        if both and cosine(record.embedding, other.embedding) >= dedup:  # type: ignore[arg-type]
            return "near_duplicate"
    if len(record.text) > room:
        return "budget"
    return None
