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

from plaudit_wire.names import ID_PATTERN, NO_NUL_PATTERN

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


def body_message(errors: Sequence[dict[str, Any]], body: Any) -> str | None:
    """A problem with the body as a whole (not JSON, missing, not an object), in plain words.

    FastAPI reports malformed JSON at ``("body", <character offset>)``, which would read as a
    list index; the message says the line and column instead.
    """
    if not errors:
        return None
    first = errors[0]
    loc = tuple(first.get("loc", ()))
    kind = first.get("type")
    if kind == "json_invalid":
        reason = (first.get("ctx") or {}).get("error", "invalid JSON")
        offset = loc[1] if len(loc) > 1 and isinstance(loc[1], int) else None
        return f"the body is not valid JSON: {reason}{_where(body, offset)}"
    if loc == ("body",) and kind == "missing":
        return "the request body is missing: send a JSON object (Content-Type: application/json)"
    if loc == ("body",) and isinstance(first.get("input"), bytes | bytearray):
        return "the body is not JSON: send a JSON object with Content-Type: application/json"
    if loc == ("body",) and kind in ("model_type", "model_attributes_type", "dict_type"):
        return f"the body must be a JSON object, not {_json_kind(first.get('input'))}"
    return None


def _where(doc: Any, offset: int | None) -> str:
    if offset is None:
        return ""
    if isinstance(doc, bytes | bytearray):
        doc = bytes(doc).decode("utf-8", "replace")
    if not isinstance(doc, str):
        return f" (at character {offset + 1})"
    line = doc.count("\n", 0, offset) + 1
    column = offset - (doc.rfind("\n", 0, offset) + 1) + 1
    return f" at line {line}, column {column}"


def _json_kind(value: Any) -> str:
    names = {list: "an array", str: "a string", bool: "a boolean", int: "a number"}
    names[float] = "a number"
    return "null" if value is None else names.get(type(value), "that value")


def plain_message(error: dict[str, Any]) -> str:
    """pydantic's message without its ``Value error, `` prefix, and id rules in words."""
    pattern = (error.get("ctx") or {}).get("pattern")
    if error.get("type") == "string_pattern_mismatch" and pattern == ID_PATTERN:
        return "an id must not hold control characters (NUL, newline, tab, ...)"
    if error.get("type") == "string_pattern_mismatch" and pattern == NO_NUL_PATTERN:
        return "text must not hold NUL characters (U+0000)"
    return str(error.get("msg", "invalid value")).removeprefix("Value error, ")
