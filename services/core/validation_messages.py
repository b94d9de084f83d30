"""Validation errors in plain words: every problem with its field, unions reduced to the branch
that matches the input's shape (issue 9).

pydantic reports a value that fails a union once per branch (``prompt.str``,
``prompt.list[Message]``). A branch that failed only because the value has another type says
nothing useful when another branch accepted the type and found the real problem, so it is
dropped; when every branch rejects the type, the branches are merged into one sentence.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

MAX_LISTED = 10
_TYPE_NAMES = frozenset({"str", "int", "float", "bool", "bytes", "dict", "list", "none"})


def is_branch_tag(part: int | str) -> bool:
    """A location part naming a union branch or a validator step, not a field.

    Field names in Plaudit's API are lower snake_case; pydantic's tags are type names
    (``str``, ``list[Message]``, ``function-after[...]``) or model class names.
    """
    return isinstance(part, str) and (
        "[" in part or part in _TYPE_NAMES or part[:1].isupper() or part.startswith("constrained-")
    )


def reduce_unions(errors: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """``errors`` with the union branches that do not match the input's shape left out."""
    groups: dict[tuple[Any, ...], list[int]] = {}
    for index, error in enumerate(errors):
        position = _union_position(tuple(error.get("loc", ())))
        if position is not None:
            groups.setdefault(position, []).append(index)
    drop: set[int] = set()
    merged: dict[int, dict[str, Any]] = {}
    for position, members in groups.items():
        branches = {tuple(errors[i]["loc"])[len(position)] for i in members}
        if len(branches) < 2:
            continue
        mismatches = [i for i in members if _is_type_mismatch(errors[i], len(position))]
        if len(mismatches) < len(members):
            drop.update(mismatches)
        else:
            drop.update(members[1:])
            merged[members[0]] = _merge(errors, members, position)
    return [merged.get(i, e) for i, e in enumerate(errors) if i not in drop]


def _union_position(loc: tuple[Any, ...]) -> tuple[Any, ...] | None:
    for index, part in enumerate(loc):
        if is_branch_tag(part):
            return loc[:index]
    return None


def _is_type_mismatch(error: dict[str, Any], depth: int) -> bool:
    """The branch rejected the value's type at its root (``string_type``, ``list_type``...)."""
    loc = tuple(error.get("loc", ()))
    root = all(is_branch_tag(part) for part in loc[depth:])
    kind = str(error.get("type", ""))
    return root and (kind.endswith("_type") or kind == "model_attributes_type")


def _merge(
    errors: Sequence[dict[str, Any]], members: list[int], position: tuple[Any, ...]
) -> dict[str, Any]:
    wanted = [str(errors[i].get("msg", "")).removeprefix("Input should be ") for i in members]
    return {
        **errors[members[0]],
        "loc": position,
        "msg": "Input should be " + " or ".join(dict.fromkeys(wanted)),
    }


def plain_message(error: dict[str, Any]) -> str:
    """pydantic's message without its ``Value error, `` prefix."""
    return str(error.get("msg", "invalid value")).removeprefix("Value error, ")
