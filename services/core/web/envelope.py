"""The one error envelope, and the handlers that produce it for every non-2xx answer."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from redis.exceptions import RedisError
from sqlalchemy.exc import SQLAlchemyError
from starlette.exceptions import HTTPException as StarletteHTTPException

from services.core.context import request_id_var
from services.core.errors import PlauditError
from services.core.outages import as_outage
from services.core.web.validation_messages import (
    MAX_LISTED,
    body_message,
    is_branch_tag,
    plain_message,
    reduce_unions,
)

log = logging.getLogger(__name__)

#: Exceptions that may mean the database or Redis is down (classified by ``as_outage``).
OUTAGE_TYPES: tuple[type[Exception], ...] = (SQLAlchemyError, RedisError, OSError)

_HTTP_TYPES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    429: "overloaded",
}


#: FastAPI's answer to a body it cannot decode (not UTF-8, nested too deep), in plain words.
_FASTAPI_UNREADABLE = "There was an error parsing the body"
_UNREADABLE = "the body could not be read: send UTF-8 encoded JSON"


def error_body(
    error_type: str, message: str, param: str | None = None, request_id: str | None = None
) -> dict[str, Any]:
    """Build ``{"error": {...}}``."""
    rid = request_id or request_id_var.get()
    return {
        "error": {
            "type": error_type,
            "message": _printable(message),
            "param": None if param is None else _printable(param),
            "request_id": rid,
        }
    }


def _printable(text: str) -> str:
    """``text`` as valid UTF-8: a lone surrogate from the input is written as ``\\udxxx``."""
    return text if text.isascii() else text.encode("utf-8", "backslashreplace").decode("utf-8")


def error_response(
    status: int,
    error_type: str,
    message: str,
    param: str | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    # The request id header itself is added by RequestContextMiddleware on every response.
    body = error_body(error_type, message, param)
    return JSONResponse(body, status_code=status, headers=headers)


def format_loc(loc: Sequence[int | str]) -> str | None:
    """``("body", "groups", 0, "scores")`` -> ``"groups[0].scores"``."""
    # Only the first element says where the value came from; a body field may itself be
    # called "query" (OpenRLHF's request has one).
    if len(loc) == 2 and loc[0] == "header":
        return str(loc[1])  # header names are not field names (Idempotency-Key)
    parts = list(loc[1:] if loc and loc[0] in ("body", "query", "path", "header") else loc)
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif is_branch_tag(part):
            # pydantic tags union branches and validator steps ("function-after[...]",
            # "list[Message]", "str"): not field names.
            continue
        else:
            out += f".{part}" if out else str(part)
    return out or None


def _validation_message(exc: RequestValidationError) -> tuple[str, str | None]:
    """Every problem, each with its field; ``param`` names the first."""
    body_problem = body_message(list(exc.errors()), exc.body)
    if body_problem is not None:
        return body_problem, None
    errors = reduce_unions(list(exc.errors()))
    if not errors:
        return "invalid request", None
    lines = []
    for error in errors[:MAX_LISTED]:
        where = format_loc(error.get("loc", ()))
        lines.append(f"{where}: {plain_message(error)}" if where else plain_message(error))
    text = "; ".join(lines)
    if len(errors) > MAX_LISTED:
        text += f"; and {len(errors) - MAX_LISTED} more problems"
    return text, format_loc(errors[0].get("loc", ()))


async def _on_plaudit_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, PlauditError)
    _count(request, exc.error_type)
    return error_response(exc.status_code, exc.error_type, exc.message, exc.param, exc.headers)


async def _on_validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    _count(request, "invalid_request")
    message, param = _validation_message(exc)
    return error_response(422, "invalid_request", message, param)


async def _on_http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    error_type = _HTTP_TYPES.get(exc.status_code, "http_error")
    _count(request, error_type)
    headers = dict(exc.headers or {})
    message = _UNREADABLE if exc.detail == _FASTAPI_UNREADABLE else str(exc.detail)
    return error_response(exc.status_code, error_type, message, None, headers)


async def _on_possible_outage(request: Request, exc: Exception) -> JSONResponse:
    """Database and Redis errors that no repository translated: 503 for an outage, else 500."""
    outage = as_outage(exc)
    if outage is None:
        log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
        _count(request, "internal_error")
        return error_response(500, "internal_error", "internal server error")
    log.warning("%s on %s: %s", outage.error_type, request.url.path, type(exc).__name__)
    return await _on_plaudit_error(request, outage)


def _count(request: Request, error_type: str) -> None:
    metrics = getattr(request.app.state, "metrics", None)
    if metrics is not None:
        metrics.errors.labels(error_type).inc()


def install_error_handlers(app: FastAPI) -> None:
    """Route every error through the envelope (unexpected ones are caught by the middleware)."""
    app.add_exception_handler(PlauditError, _on_plaudit_error)
    app.add_exception_handler(RequestValidationError, _on_validation_error)
    app.add_exception_handler(StarletteHTTPException, _on_http_error)
    for outage_type in OUTAGE_TYPES:
        app.add_exception_handler(outage_type, _on_possible_outage)
