"""Edit operations on a rubric's adaptive criteria: check, apply, and spot undos (pure).

The editor proposes operations (``add``, ``remove``, ``reword``, ``reweight``); each is
checked on its own against the rubric as the earlier accepted operations left it, and is
accepted or refused with a reason. Anchors never change. ``similar(a, b)`` is the cosine of two
texts' embeddings (the service passes the embedder's; tests may pass any function)::

    checked = check_operations(criteria, proposed, limits, similar)
    new = apply_operations(criteria, [c for c in checked if c.accepted])

An operation *undoes* an earlier one when it removes a criterion added, re-adds (a
near-duplicate of) a criterion removed, rewords a criterion back to an earlier text, or moves a
weight back the other way, within the last revisions (:func:`find_undo`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from plaudit_wire.rubrics import Criterion, CriterionIn
from services.rubrics.validation import normalized_text

OpName = Literal["add", "remove", "reword", "reweight"]
#: The fewest words of a criterion an edit may write ("Names the cause" has three).
MIN_WORDS = 3
_ID_LIKE = re.compile(r"^c?[0-9]+$", re.IGNORECASE)
Similar = Callable[[str, str], float]


class EditOperation(BaseModel):
    """One operation as the editor writes it (empty fields are unused)."""

    model_config = ConfigDict(extra="forbid")

    op: OpName
    id: str = Field(default="", max_length=20, description="the criterion: remove/reword/reweight")
    text: str = Field(default="", max_length=300, description="add/reword: the criterion text")
    weight: float = Field(default=0.0, ge=0, le=1000, description="add/reweight (0: unchanged)")
    kind: Literal["required", "pitfall"] = "required"


@dataclass(frozen=True)
class Limits:
    max_operations: int
    max_criteria: int
    max_weight: float
    near_duplicate: float


@dataclass(frozen=True)
class Checked:
    """An operation and the verdict on it; ``before`` holds what it changes (text, weight)."""

    operation: EditOperation
    accepted: bool
    reason: str | None = None
    before: dict[str, Any] = field(default_factory=dict)

    def wire(self) -> dict[str, Any]:
        return {
            **self.operation.model_dump(),
            "accepted": self.accepted,
            "reason": self.reason,
            "before": self.before,
        }


def accepted_from_wire(operations: Sequence[dict[str, Any]]) -> list[Checked]:
    """The accepted operations of a stored revision (``Checked.wire`` form) as they were
    checked: an admin's approval of a held revision applies exactly what the guard held."""
    fields = set(EditOperation.model_fields)
    return [
        Checked(
            EditOperation(**{k: v for k, v in op.items() if k in fields}),
            True,
            None,
            dict(op.get("before") or {}),
        )
        for op in operations
        if op.get("accepted")
    ]


def check_operations(
    criteria: Sequence[Criterion],
    proposed: Sequence[EditOperation],
    limits: Limits,
    similar: Similar,
) -> list[Checked]:
    """Each operation accepted or refused (with why), in order."""
    working = list(criteria)
    touched: set[str] = set()
    out: list[Checked] = []
    for index, op in enumerate(proposed):
        if index >= limits.max_operations:
            out.append(Checked(op, False, f"over the limit of {limits.max_operations} operations"))
            continue
        reason = _refusal(working, op, touched, limits, similar)
        if reason is not None:
            out.append(Checked(op, False, reason))
            continue
        target = None if op.op == "add" else _find(working, op.id)
        before = {} if target is None else {"text": target.text, "weight": target.weight}
        out.append(Checked(op, True, None, before))
        working = _applied(working, op)
        touched.add(op.id or f"new:{index}")
    return out


def _refusal(
    working: Sequence[Criterion],
    op: EditOperation,
    touched: set[str],
    limits: Limits,
    similar: Similar,
) -> str | None:
    if op.op == "add":
        return _add_refusal(working, op, limits, similar)
    target = _find(working, op.id)
    if target is None:
        return f"unknown criterion {op.id!r}"
    if target.anchor:
        return f"{op.id} is an anchor: anchors never change"
    if op.id in touched:
        return f"{op.id} is already edited in this revision"
    if op.op == "remove":
        required = [c for c in working if c.kind == "required" and c.id != op.id]
        return None if required else "the rubric needs at least one required criterion"
    if op.op == "reword":
        bad_text = _text_refusal(op.text)
        if bad_text is not None:
            return bad_text
        if normalized_text(op.text) == normalized_text(target.text):
            return "the new text is the old one"
        return _duplicate(working, op.text, limits, similar, exclude=op.id)
    if not 0 < op.weight <= limits.max_weight:
        return f"weight must lie in (0, {limits.max_weight:g}]"
    if op.weight == target.weight:
        return "the weight is unchanged"
    return None


def _text_refusal(text: str) -> str | None:
    """A criterion must read as a statement: at least MIN_WORDS words, not an id."""
    words = text.split()
    if not words:
        return "needs a text"
    if _ID_LIKE.match(text.strip()) or len(words) < MIN_WORDS:
        return f"the text {text.strip()[:40]!r} is not a criterion (at least {MIN_WORDS} words)"
    return None


def _add_refusal(
    working: Sequence[Criterion], op: EditOperation, limits: Limits, similar: Similar
) -> str | None:
    if op.id and _find(working, op.id) is not None:
        return f"add names the existing {op.id} (reword or reweight it instead)"
    bad_text = _text_refusal(op.text)
    if bad_text is not None:
        return bad_text
    if len(working) + 1 > limits.max_criteria:
        return f"the rubric would exceed {limits.max_criteria} criteria"
    weight = op.weight or 1.0
    if not 0 < weight <= limits.max_weight:
        return f"weight must lie in (0, {limits.max_weight:g}]"
    return _duplicate(working, op.text, limits, similar, exclude=None)


def _duplicate(
    working: Sequence[Criterion],
    text: str,
    limits: Limits,
    similar: Similar,
    exclude: str | None,
) -> str | None:
    for other in working:
        if other.id == exclude:
            continue
        if normalized_text(other.text) == normalized_text(text):
            return f"repeats {other.id}"
        score = similar(text, other.text)
        if score >= limits.near_duplicate:
            return f"a near-duplicate of {other.id} (similarity {score:.2f})"
    return None


def _find(criteria: Sequence[Criterion], cid: str) -> Criterion | None:
    return next((c for c in criteria if c.id == cid), None)


def _applied(criteria: Sequence[Criterion], op: EditOperation) -> list[Criterion]:
    if op.op == "add":
        # A placeholder id ("+N") until the rubric service gives it c<next>.
        new = Criterion(
            id=f"+{len(criteria)}",
            text=op.text.strip(),
            weight=op.weight or 1.0,
            kind=op.kind,
            anchor=False,
        )
        return [*criteria, new]
    if op.op == "remove":
        return [c for c in criteria if c.id != op.id]
    if op.op == "reword":
        change: dict[str, Any] = {"text": op.text.strip()}
    else:
        change = {"weight": op.weight}
    return [c.model_copy(update=change) if c.id == op.id else c for c in criteria]


def apply_operations(
    criteria: Sequence[Criterion], accepted: Sequence[Checked]
) -> list[CriterionIn]:
    """The criteria after the accepted operations, as a rubric update sends them (new
    criteria without an id, so the rubric service gives them the next free ones)."""
    working = list(criteria)
    for checked in accepted:
        working = _applied(working, checked.operation)
    return [
        CriterionIn(
            id=None if c.id.startswith("+") else c.id,
            text=c.text,
            weight=c.weight,
            kind=c.kind,
            anchor=c.anchor,
        )
        for c in working
    ]


@dataclass(frozen=True)
class PastOperation:
    """An applied operation of an earlier revision (``id``: the criterion it made or touched)."""

    revision: str
    op: OpName
    id: str
    text: str
    weight: float
    before: dict[str, Any]


def find_undo(
    op: EditOperation, past: Sequence[PastOperation], similar: Similar, threshold: float
) -> str | None:
    """How ``op`` undoes one of ``past`` (the last revisions' operations), or None."""
    for earlier in reversed(past):
        why = _undoes(op, earlier, similar, threshold)
        if why is not None:
            return f"{why} (revision {earlier.revision})"
    return None


def _undoes(
    op: EditOperation, earlier: PastOperation, similar: Similar, threshold: float
) -> str | None:
    if op.op == "remove" and earlier.op == "add" and op.id == earlier.id:
        return f"removes {op.id}, which a recent revision added"
    if op.op == "add" and earlier.op == "remove":
        old = str(earlier.before.get("text", ""))
        if old and similar(op.text, old) >= threshold:
            return f"re-adds {earlier.id}, which a recent revision removed"
    if op.op == "reword" and earlier.op == "reword" and op.id == earlier.id:
        old = str(earlier.before.get("text", ""))
        if old and similar(op.text, old) >= threshold:
            return f"rewords {op.id} back to its earlier text"
    if op.op == "reweight" and earlier.op == "reweight" and op.id == earlier.id:
        start = float(earlier.before.get("weight", earlier.weight))
        if (earlier.weight - start) * (op.weight - earlier.weight) < 0:
            return f"moves {op.id}'s weight back"
    return None
