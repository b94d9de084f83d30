"""What the analyst and the editor are asked, and the JSON they must answer (no I/O)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from judges.backends.base import ChatMessage, system, user
from plaudit_wire.rubrics import Criterion

ANALYSIS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "went_right": {"type": "string", "maxLength": 160},
        "went_wrong": {"type": "string", "maxLength": 160},
        "hacking": {"type": "boolean"},
    },
    "required": ["went_right", "went_wrong", "hacking"],
    "additionalProperties": False,
}

EDIT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "operations": {
            "type": "array",
            "maxItems": 3,
            "items": {
                "type": "object",
                "properties": {
                    "op": {"enum": ["add", "remove", "reword", "reweight"]},
                    "id": {"type": "string", "maxLength": 8},
                    "text": {"type": "string", "maxLength": 160},
                    "weight": {"type": "number"},
                },
                "required": ["op", "id", "text", "weight"],
                "additionalProperties": False,
            },
        },
        "rationale": {"type": "string", "maxLength": 300},
    },
    "required": ["operations", "rationale"],
    "additionalProperties": False,
}

_ANALYST = (
    "You review one answer that a model gave during training, with the rubric verdicts it got. "
    "Say briefly what went right, what went wrong, and whether the answer games the rubric "
    "(padding, repeating the criteria, claiming things without doing them). Answer in JSON."
)

_EDITOR = (
    "You maintain a grading rubric used as a reward during training. Criteria marked ANCHOR "
    "never change. You may edit the other criteria: add a criterion, remove one, reword one "
    "(make a saturated criterion harder), or reweight one. Propose at most 3 operations, or "
    "none if the rubric works. Fields: op, id (the criterion, empty for add), text (empty "
    "unless add or reword), weight (0 unless add or reweight). Answer in JSON."
)


def rubric_lines(criteria: Sequence[Criterion]) -> str:
    return "\n".join(
        f"{c.id} ({c.kind}, weight {c.weight:g}{', ANCHOR' if c.anchor else ''}): {c.text}"
        for c in criteria
    )


def analyst_messages(
    question: str,
    answer: str,
    reward: float | None,
    verdicts: Mapping[str, float | None],
    criteria: Sequence[Criterion],
) -> list[ChatMessage]:
    marks = "\n".join(
        f"{c.id}: {'met' if (p := verdicts.get(c.id)) is not None and p >= 0.5 else 'not met'}"
        f" - {c.text}"
        for c in criteria
    )
    shown = "n/a" if reward is None else f"{reward:.2f}"
    body = (
        f"Question:\n{question[:1200]}\n\nAnswer:\n{answer[:1500]}\n\n"
        f"Reward: {shown}\nVerdicts:\n{marks}"
    )
    return [system(_ANALYST), user(body)]


def editor_messages(
    criteria: Sequence[Criterion], summary: str, history: Sequence[str]
) -> list[ChatMessage]:
    past = "\n".join(f"- {h}" for h in history) or "- (none)"
    body = (
        f"Rubric:\n{rubric_lines(criteria)}\n\nThis step:\n{summary}\n\n"
        f"History from the memory:\n{past}"
    )
    return [system(_EDITOR), user(body)]
