"""Access log lines: one per HTTP request, with what the services noted about it (issue 10).

The middleware opens a note per request; a service adds what an operator needs to see a run
(``note(run_id=..., group_size=8, channels="diversity,judge_scale")``); the middleware then
logs one line on the ``plaudit.access`` logger with method, route, status and latency. Texts
never go into a note.
"""

from __future__ import annotations

import logging
from contextvars import ContextVar
from typing import Any

access_log = logging.getLogger("plaudit.access")

_note: ContextVar[dict[str, Any] | None] = ContextVar("plaudit_access_note", default=None)


def open_note() -> Any:
    """Start the note of one request; returns the token to :func:`close_note` it with."""
    return _note.set({})


def note(**fields: Any) -> None:
    """Add fields to the current request's access line (nothing outside a request)."""
    current = _note.get()
    if current is not None:
        current.update({k: v for k, v in fields.items() if v is not None})


def close_note(token: Any, method: str, route: str, status: int, seconds: float) -> None:
    """Log the request's line and forget its note."""
    fields = _note.get() or {}
    _note.reset(token)
    extra = "".join(f" {k}={_clean(v)}" for k, v in fields.items())
    access_log.info("%s %s %d %.1fms%s", method, route, status, seconds * 1000, extra)


def _clean(value: Any) -> str:
    """A value on one line, without spaces (run ids are free text)."""
    text = str(value)
    return "".join(c if c.isprintable() and not c.isspace() else "_" for c in text)[:200]
