"""The texts a revision writes: which rollouts the analyst reads, what an analysis record
says, how an operation reads in a rubric update (pure)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from plaudit_wire.rubrics import Criterion, RubricOut
from services.memory import llm
from services.memory.models import MemoryRollout


def sample_rollouts(rows: Sequence[MemoryRollout], n: int) -> list[tuple[MemoryRollout, int]]:
    """``n`` completions of the step for the analyst: alternately the best and the worst
    rewarded (ties by order), so both what works and what fails are read."""
    every = [(row, i) for row in rows for i, reward in enumerate(row.rewards) if reward is not None]
    ranked = sorted(every, key=lambda p: (-p[0].rewards[p[1]], p[0].id, p[1]))
    out: list[tuple[MemoryRollout, int]] = []
    low, high = len(ranked) - 1, 0
    while len(out) < min(n, len(ranked)):
        if len(out) % 2 == 0:
            out.append(ranked[high])
            high += 1
        else:
            out.append(ranked[low])
            low -= 1
    return out


def analysis_text(
    rollout: llm.Rollout, analysis: llm.Analysis, criteria: Sequence[Criterion]
) -> str:
    """The stored text of an analysis: the facts, then what the analyst wrote (if usable)."""
    met = [c.id for c in criteria if (p := rollout.verdicts.get(c.id)) is not None and p >= 0.5]
    missed = [c.id for c in criteria if c.id not in met]
    reward = "n/a" if rollout.reward is None else f"{rollout.reward:.3f}"
    text = (
        f"Reward {reward}, {len(rollout.answer)} characters; met {', '.join(met) or 'none'}; "
        f"not met {', '.join(missed) or 'none'}."
    )
    if analysis.status == "ok":
        text += f" Right: {analysis.went_right or '-'}. Wrong: {analysis.went_wrong or '-'}."
        if analysis.hacking:
            text += " Possible reward hacking."
    else:
        text += f" (analyst reply unusable: {analysis.status})"
    return text


def describe(op: dict[str, Any]) -> str:
    name = op["op"]
    cid = op.get("made_id") or op.get("id") or "?"
    if name == "add":
        return f"add {cid} '{op.get('text', '')}'"
    if name == "remove":
        return f"remove {cid} '{op.get('before', {}).get('text', '')}'"
    if name == "reword":
        return f"reword {cid} '{op.get('before', {}).get('text', '')}' -> '{op.get('text', '')}'"
    return f"reweight {cid} {op.get('before', {}).get('weight')} -> {op.get('weight')}"


def name_new_ids(operations: list[dict[str, Any]], old: RubricOut, new: RubricOut) -> None:
    """Give each accepted ``add`` the id the rubric service gave its criterion."""
    known = {c.id for c in old.criteria}
    fresh = iter(c.id for c in new.criteria if c.id not in known)
    for op in operations:
        if op["accepted"] and op["op"] == "add":
            op["made_id"] = next(fresh, None)
