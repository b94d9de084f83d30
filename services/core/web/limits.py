"""Per-request cost limits that live in settings and show in the OpenAPI schema (issue 9).

Request models mark a limited field with :data:`plaudit_wire.limits.Text` (or
``MaxNewTokens``); the guard middleware puts the app's :class:`LimitsSettings` in force for each
request (:func:`use_limits`), the defaults apply elsewhere in a server process, and
:func:`show_limits` writes the same values into the OpenAPI schema.
"""

from __future__ import annotations

from contextvars import Token
from typing import Any

from plaudit_wire import limits as wire
from services.core.reliability_settings import LimitsSettings

_KEYWORDS = {"max_text_chars": "maxLength", "max_new_tokens": "maximum"}


def _text_limits(limits: LimitsSettings) -> wire.TextLimits:
    return wire.TextLimits(limits.max_text_chars, limits.max_new_tokens)


# A server process checks sizes outside a request too (jobs, in-process calls), with defaults.
wire.set_fallback(_text_limits(LimitsSettings()))


def use_limits(limits: LimitsSettings) -> Token[wire.TextLimits | None]:
    """Put ``limits`` in force for the current request; returns the token to reset."""
    return wire.use_limits(_text_limits(limits))


def reset_limits(token: Token[wire.TextLimits | None]) -> None:
    wire.reset_limits(token)


def show_limits(schema: dict[str, Any], limits: LimitsSettings) -> dict[str, Any]:
    """Write the limits in force into an OpenAPI schema (in place; returns it)."""
    stack: list[Any] = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            name = node.get(wire.LIMIT_KEY)
            if name in _KEYWORDS:
                node[_KEYWORDS[name]] = getattr(limits, name)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return schema
