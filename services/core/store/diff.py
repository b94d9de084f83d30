"""A structured diff of two JSON values, for comparing artifact versions.

Objects are compared key by key. A list whose items are all objects with a distinct scalar
``id`` (rubric criteria, for instance) is compared by id, so a reworded criterion shows as one
change to ``criteria[id=c1].text`` rather than a removal plus an addition (criterion ids stay
stable across revisions: issue 11); a change of order among the same ids is reported under
``reordered``. Any other list is compared position by position.

    >>> d = diff_json({"criteria": [{"id": "c1", "text": "a"}]},
    ...               {"criteria": [{"id": "c1", "text": "b"}]})
    >>> [(c.path, c.old, c.new) for c in d.changed]
    [('criteria[id=c1].text', 'a', 'b')]
"""

from __future__ import annotations

import re
from typing import Any

from plaudit_wire.artifacts import DiffEntry, JsonDiff, PathSegment

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


def diff_json(old: Any, new: Any) -> JsonDiff:
    """What changed from ``old`` to ``new`` (see the module docstring)."""
    out = JsonDiff()
    _walk(old, new, [], out)
    return out


def render_path(at: list[PathSegment]) -> str:
    """``["criteria", {"id": "c1"}, "text"]`` -> ``criteria[id=c1].text``; the root is ``""``."""
    text = ""
    for segment in at:
        if isinstance(segment, dict):
            text += f"[id={segment['id']}]"
        elif isinstance(segment, int):
            text += f"[{segment}]"
        elif _IDENTIFIER.fullmatch(segment):
            text += f".{segment}" if text else segment
        else:
            text += f"[{_quote(segment)}]"
    return text


def _quote(key: str) -> str:
    return '"' + key.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _entry(at: list[PathSegment], old: Any = None, new: Any = None) -> DiffEntry:
    return DiffEntry(path=render_path(at), at=list(at), old=old, new=new)


def _same_scalar(old: Any, new: Any) -> bool:
    # JSON true is not 1: a bool only equals a bool.
    if isinstance(old, bool) or isinstance(new, bool):
        return type(old) is type(new) and old == new
    return bool(old == new)


def _walk(old: Any, new: Any, at: list[PathSegment], out: JsonDiff) -> None:
    if isinstance(old, dict) and isinstance(new, dict):
        _walk_dict(old, new, at, out)
    elif isinstance(old, list) and isinstance(new, list):
        if _keyed_by_id(old) and _keyed_by_id(new):
            _walk_by_id(old, new, at, out)
        else:
            _walk_by_position(old, new, at, out)
    elif isinstance(old, dict | list) or isinstance(new, dict | list):
        if old != new:
            out.changed.append(_entry(at, old, new))
    elif not _same_scalar(old, new):
        out.changed.append(_entry(at, old, new))


def _walk_dict(
    old: dict[str, Any], new: dict[str, Any], at: list[PathSegment], out: JsonDiff
) -> None:
    for key in old:
        if key not in new:
            out.removed.append(_entry([*at, key], old=old[key]))
    for key in new:
        if key not in old:
            out.added.append(_entry([*at, key], new=new[key]))
        else:
            _walk(old[key], new[key], [*at, key], out)


def _keyed_by_id(items: list[Any]) -> bool:
    """Every item is an object with a distinct string or integer ``id``."""
    ids: list[Any] = []
    for item in items:
        if not isinstance(item, dict):
            return False
        key = item.get("id")
        if isinstance(key, bool) or not isinstance(key, str | int):
            return False
        ids.append(key)
    return len(set(ids)) == len(ids)


def _walk_by_id(old: list[Any], new: list[Any], at: list[PathSegment], out: JsonDiff) -> None:
    if not old and not new:
        return
    before = {item["id"]: item for item in old}
    after = {item["id"]: item for item in new}
    for key, item in before.items():
        if key not in after:
            out.removed.append(_entry([*at, {"id": key}], old=item))
    for key, item in after.items():
        if key not in before:
            out.added.append(_entry([*at, {"id": key}], new=item))
        else:
            _walk(before[key], item, [*at, {"id": key}], out)
    kept_before = [key for key in before if key in after]
    kept_after = [key for key in after if key in before]
    if kept_before != kept_after:
        out.reordered.append(_entry(at, kept_before, kept_after))


def _walk_by_position(old: list[Any], new: list[Any], at: list[PathSegment], out: JsonDiff) -> None:
    for index in range(min(len(old), len(new))):
        _walk(old[index], new[index], [*at, index], out)
    for index in range(len(new), len(old)):
        out.removed.append(_entry([*at, index], old=old[index]))
    for index in range(len(old), len(new)):
        out.added.append(_entry([*at, index], new=new[index]))
