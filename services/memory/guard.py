"""The oscillation guard: whether a revision may become current, or is held (pure).

Before a new version is used, the run's frozen rollouts (the first completions the memory
stored, fixed for the whole run) are judged again with it. A revision is *held* (kept, shown
to the admin, not made current) when

* one of its operations undoes an operation of the last ``undo_window`` applied revisions
  (:func:`services.memory.operations.find_undo`), or
* it flips more than ``max_flip_rate`` of the frozen verdicts (P(met) on either side of 0.5,
  criteria present in both versions) of criteria that the current evidence does not name:
  an edit that changes many earlier verdicts with no saturated, non-separating or hacked
  criterion behind it is churn, not curriculum.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Flips:
    flipped: int
    compared: int
    criteria: list[str]

    @property
    def rate(self) -> float:
        return self.flipped / self.compared if self.compared else 0.0


def verdict_flips(
    before: Sequence[Mapping[str, float | None]],
    after: Sequence[Mapping[str, float | None]],
    *,
    ignore: set[str] | frozenset[str] = frozenset(),
) -> Flips:
    """How many verdicts changed side of 0.5 from ``before`` to ``after`` (per completion,
    criterion id -> P(met)), over the criteria both assessed and not in ``ignore``.

    >>> verdict_flips([{"c1": 0.9, "c2": 0.2}], [{"c1": 0.1, "c2": 0.3}]).rate
    0.5
    """
    flipped, compared, which = 0, 0, set()
    for old, new in zip(before, after, strict=True):
        for cid, p_old in old.items():
            p_new = new.get(cid)
            if cid in ignore or p_old is None or p_new is None:
                continue
            compared += 1
            if (p_old >= 0.5) != (p_new >= 0.5):
                flipped += 1
                which.add(cid)
    return Flips(flipped, compared, sorted(which))


def hold_reason(undos: Sequence[str], flips: Flips, max_flip_rate: float) -> str | None:
    """Why the revision is held, or None when it may become current."""
    if undos:
        return "undoes a recent edit: " + "; ".join(undos)
    if flips.compared and flips.rate > max_flip_rate:
        return (
            f"flips {flips.flipped} of {flips.compared} frozen verdicts ({flips.rate:.0%}) of "
            f"{', '.join(flips.criteria)} without new evidence"
        )
    return None
