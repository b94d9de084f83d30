"""Per-request context (the request id) shared by logging and the error envelope."""

from __future__ import annotations

import logging
import uuid
from contextvars import ContextVar

REQUEST_ID_HEADER = "X-Request-ID"
request_id_var: ContextVar[str | None] = ContextVar("plaudit_request_id", default=None)


def new_request_id() -> str:
    return f"req_{uuid.uuid4().hex[:20]}"


def clean_request_id(value: str | None) -> str:
    """Accept a caller's id when it is short and printable, else make a new one."""
    if value and len(value) <= 128 and value.isprintable() and " " not in value:
        return value
    return new_request_id()


class RequestIdFilter(logging.Filter):
    """Adds ``request_id`` to every log record."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = request_id_var.get() or "-"
        return True


def configure_logging(level: str) -> None:
    """stdlib logging with the request id in every line."""
    handler = logging.StreamHandler()
    handler.addFilter(RequestIdFilter())
    handler.setFormatter(
        logging.Formatter("%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s")
    )
    root = logging.getLogger()
    root.handlers = [handler]
    root.setLevel(level)
