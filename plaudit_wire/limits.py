"""Per-deployment size limits of request fields: :data:`Text` and :data:`MaxNewTokens`.

A server decides its limits (``PLAUDIT_LIMITS_*``) and puts them in force for each request
with :func:`use_limits`; its OpenAPI schema shows the values (``services.core.web.limits``). A
process that puts none in force, such as a trainer's client building requests, checks no size:
the server it sends to knows its own limits and answers 422 with the field.

>>> token = use_limits(TextLimits(max_text_chars=3, max_new_tokens=8))
>>> _check_text("abcd")
Traceback (most recent call last):
...
ValueError: text of 4 characters exceeds the limit of 3 (PLAUDIT_LIMITS_MAX_TEXT_CHARS)
>>> reset_limits(token)
"""

from __future__ import annotations

from contextvars import ContextVar, Token
from dataclasses import dataclass
from typing import Annotated

from pydantic import AfterValidator, Field

#: The schema key that marks a limited field; the server writes the value in force beside it.
LIMIT_KEY = "x-plaudit-limit"


@dataclass(frozen=True)
class TextLimits:
    """The sizes a request's texts and token budgets may reach."""

    max_text_chars: int
    max_new_tokens: int


_active: ContextVar[TextLimits | None] = ContextVar("plaudit_limits", default=None)
_fallback: TextLimits | None = None


def use_limits(limits: TextLimits) -> Token[TextLimits | None]:
    """Put ``limits`` in force for the current request; returns the token to reset."""
    return _active.set(limits)


def reset_limits(token: Token[TextLimits | None]) -> None:
    _active.reset(token)


def set_fallback(limits: TextLimits) -> None:
    """The limits that apply outside a request in this process (a server's defaults)."""
    global _fallback
    _fallback = limits


def active_limits() -> TextLimits | None:
    """The limits in force: the current request's, else the process fallback, else none."""
    return _active.get() or _fallback


def _check_text(value: str) -> str:
    # Characters are code points, as JSON Schema's maxLength counts them: a character outside
    # the BMP is one, sent raw or as a JSON surrogate-pair escape (issue 23; the schema and
    # the server agree: tests/services/core/web/test_schema_agrees.py).
    limits = active_limits()
    if limits is not None and len(value) > limits.max_text_chars:
        raise ValueError(
            f"text of {len(value)} characters exceeds the limit of {limits.max_text_chars} "
            "(PLAUDIT_LIMITS_MAX_TEXT_CHARS)"
        )
    return value


def _check_max_new_tokens(value: int) -> int:
    limits = active_limits()
    if limits is not None and value > limits.max_new_tokens:
        raise ValueError(
            f"{value} exceeds the limit of {limits.max_new_tokens} (PLAUDIT_LIMITS_MAX_NEW_TOKENS)"
        )
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
