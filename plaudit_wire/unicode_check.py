"""Lone UTF-16 surrogates and NUL characters in a request body (issue 9).

Python's JSON parser reads ``"\\ud800"`` (which ``json.dumps`` writes for undecodable bytes) as a
string holding a lone surrogate. Such a string is not valid Unicode: tokenizers and encoders
refuse it, and a model batch that holds it fails for every request in the batch. Bodies are
checked once, after parsing, so the caller gets a 422 naming the field and nothing else runs.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

_SURROGATE = re.compile("[\ud800-\udfff]")

Location = tuple[int | str, ...]


def has_surrogate(text: str) -> bool:
    """Whether ``text`` holds a lone UTF-16 surrogate (code points U+D800..U+DFFF)."""
    return not text.isascii() and _SURROGATE.search(text) is not None


def has_nul(text: str) -> bool:
    """Whether ``text`` holds NUL (U+0000), which Postgres text and jsonb cannot store."""
    return "\x00" in text


def find_surrogates(value: Any, limit: int = 10) -> list[Location]:
    """Where, in parsed JSON, strings (values or keys) hold a lone surrogate; at most ``limit``.

    Example: ``find_surrogates({"completions": ["ok", "\\ud800"]}) == [("completions", 1)]``
    """
    return find_strings(value, has_surrogate, limit)


def find_strings(value: Any, bad: Callable[[str], bool], limit: int = 10) -> list[Location]:
    """Where, in parsed JSON, strings (values or keys) are ``bad``; at most ``limit``."""
    found: list[Location] = []
    stack: list[tuple[Location, Any]] = [((), value)]
    while stack and len(found) < limit:
        loc, node = stack.pop()
        if isinstance(node, str):
            if bad(node):
                found.append(loc)
        elif isinstance(node, dict):
            for key, item in reversed(node.items()):
                if isinstance(key, str) and bad(key):
                    found.append((*loc, key))
                stack.append(((*loc, key), item))
        elif isinstance(node, list):
            stack.extend(((*loc, i), item) for i, item in reversed(list(enumerate(node))))
    return found[:limit]


def surrogate_errors(body: Any) -> list[dict[str, Any]]:
    """Validation errors (pydantic's shape) for each string in ``body`` with a lone surrogate."""
    return [
        {
            "type": "string_unicode",
            "loc": ("body", *loc),
            "msg": "the text holds a lone UTF-16 surrogate (U+D800..U+DFFF), which is not "
            "valid Unicode: send valid UTF-8 text",
            "input": None,
        }
        for loc in find_surrogates(body)
    ]
