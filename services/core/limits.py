"""Per-request cost limits that live in settings and show in the OpenAPI schema (issue 9).

Request models mark a limited field with :data:`Text` (or :func:`at_most`); the value is checked
against the app's :class:`LimitsSettings`, which the guard middleware puts in force for each
request, and :func:`show_limits` writes the same values into the OpenAPI schema.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Annotated, Any

from pydantic import AfterValidator, Field

from services.core.reliability_settings import LimitsSettings

LIMIT_KEY = "x-plaudit-limit"
_active: ContextVar[LimitsSettings | None] = ContextVar("plaudit_limits", default=None)
_DEFAULTS = LimitsSettings()
#: Which JSON-schema keyword each limit sets.
_KEYWORDS = {"max_text_chars": "maxLength", "max_new_tokens": "maximum"}


def active_limits() -> LimitsSettings:
    """The limits of the app serving the current request (defaults outside a request)."""
    return _active.get() or _DEFAULTS


def use_limits(limits: LimitsSettings) -> Any:
    """Put ``limits`` in force for the current request; returns the token to reset."""
    return _active.set(limits)


def reset_limits(token: Any) -> None:
    _active.reset(token)


def _check_text(value: str) -> str:
    # Characters are code points, as JSON Schema's maxLength counts them: a character outside
    # the BMP is one, sent raw or as a JSON surrogate-pair escape (issue 23; the schema and
    # the server agree: tests/reliability/test_schema_agrees.py).
    limit = active_limits().max_text_chars
    if len(value) > limit:
        raise ValueError(
            f"text of {len(value)} characters exceeds the limit of {limit} "
            "(PLAUDIT_LIMITS_MAX_TEXT_CHARS)"
        )
    return value


def _check_max_new_tokens(value: int) -> int:
    limit = active_limits().max_new_tokens
    if value > limit:
        raise ValueError(f"{value} exceeds the limit of {limit} (PLAUDIT_LIMITS_MAX_NEW_TOKENS)")
    return value


#: A text field limited to ``limits.max_text_chars`` characters.
Text = Annotated[
    str,
    AfterValidator(_check_text),
    Field(json_schema_extra={LIMIT_KEY: "max_text_chars"}),
]

#: A generate-mode token budget limited to ``limits.max_new_tokens``.
MaxNewTokens = Annotated[
    int,
    AfterValidator(_check_max_new_tokens),
    Field(json_schema_extra={LIMIT_KEY: "max_new_tokens"}),
]


def show_limits(schema: dict[str, Any], limits: LimitsSettings) -> dict[str, Any]:
    """Write the limits in force into an OpenAPI schema (in place; returns it)."""
    stack: list[Any] = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            name = node.get(LIMIT_KEY)
            if name in _KEYWORDS:
                node[_KEYWORDS[name]] = getattr(limits, name)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return schema
