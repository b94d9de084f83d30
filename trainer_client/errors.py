"""Typed errors of the trainer client, mirroring the server's error envelope.

Every non-2xx answer from Plaudit is ``{"error": {"type", "message", "param", "request_id"}}``;
:func:`from_response` turns it into one of the classes below, keeping each field, so a trainer
can log ``exc.request_id`` and find the same request in the server's logs::

    try:
        client.ordinal_advantages([[1, 9]], k=5)
    except InvalidRequest as exc:
        print(exc.param, exc.request_id)   # groups[0].scores[1] req_3c25...

Transport failures (no HTTP answer at all) are :class:`PlauditTimeout` and
:class:`PlauditConnectionError`; every class derives from :class:`PlauditError`.
"""

from __future__ import annotations

from typing import Any

import httpx

from plaudit_wire.retry import parse_retry_after

__all__ = [
    "AuthenticationError",
    "BackendUnavailable",
    "Conflict",
    "InvalidRequest",
    "NotFound",
    "Overloaded",
    "PermissionDenied",
    "PlauditConnectionError",
    "PlauditError",
    "PlauditTimeout",
    "ServerError",
    "from_response",
    "parse_retry_after",
]

REQUEST_ID_HEADER = "X-Request-ID"


class PlauditError(Exception):
    """Base of every error the client raises.

    ``status_code`` is None when no HTTP answer arrived; ``error_type``, ``param`` and
    ``request_id`` come from the server's envelope (None when the body was not one);
    ``retry_after`` is the server's Retry-After in seconds, when it sent one.
    """

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None = None,
        error_type: str | None = None,
        param: str | None = None,
        request_id: str | None = None,
        retry_after: float | None = None,
        response: httpx.Response | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status_code = status_code
        self.error_type = error_type
        self.param = param
        self.request_id = request_id
        self.retry_after = retry_after
        self.response = response

    def __str__(self) -> str:
        head = " ".join(str(p) for p in (self.status_code, self.error_type) if p is not None)
        text = f"[{head}] {self.message}" if head else self.message
        details = [f"{name}={value}" for name, value in self._details() if value is not None]
        return f"{text} ({', '.join(details)})" if details else text

    def _details(self) -> list[tuple[str, object]]:
        return [("param", self.param), ("request_id", self.request_id)]


class InvalidRequest(PlauditError):
    """The server rejected the request body or parameters (422, also 400, 413, 415)."""


class AuthenticationError(PlauditError):
    """Missing or unknown API key (401)."""


class PermissionDenied(PlauditError):
    """The API key lacks the scope this endpoint needs (403)."""


class NotFound(PlauditError):
    """No such path or resource (404)."""


class Conflict(PlauditError):
    """The request conflicts with stored state (409), e.g. an Idempotency-Key reused with a
    different body."""


class Overloaded(PlauditError):
    """Backpressure (429): retried by the client after the server's Retry-After."""


class ServerError(PlauditError):
    """The server failed (5xx)."""


class BackendUnavailable(ServerError):
    """A model, judge or database behind the server cannot answer now (503); retried."""


class PlauditTimeout(PlauditError):
    """No answer in time. ``phase`` is the httpx timeout that fired: connect, read, write or
    pool."""

    def __init__(self, message: str, *, phase: str | None = None) -> None:
        super().__init__(message)
        self.phase = phase

    def _details(self) -> list[tuple[str, object]]:
        return [("phase", self.phase)]


class PlauditConnectionError(PlauditError):
    """The server could not be reached, or dropped the connection."""


_BY_STATUS: dict[int, type[PlauditError]] = {
    400: InvalidRequest,
    401: AuthenticationError,
    403: PermissionDenied,
    404: NotFound,
    409: Conflict,
    413: InvalidRequest,
    415: InvalidRequest,
    422: InvalidRequest,
    429: Overloaded,
    503: BackendUnavailable,
}

_TIMEOUT_PHASES: dict[type[httpx.TimeoutException], str] = {
    httpx.ConnectTimeout: "connect",
    httpx.ReadTimeout: "read",
    httpx.WriteTimeout: "write",
    httpx.PoolTimeout: "pool",
}


def error_class(status_code: int) -> type[PlauditError]:
    """The exception class for an HTTP status (``ServerError`` for any other 5xx)."""
    if status_code in _BY_STATUS:
        return _BY_STATUS[status_code]
    return ServerError if status_code >= 500 else PlauditError


def from_response(response: httpx.Response) -> PlauditError:
    """The typed error for a non-2xx response, parsed from the envelope when there is one.

    >>> r = httpx.Response(422, json={"error": {"type": "invalid_request", "message": "bad k",
    ...     "param": "k", "request_id": "req_1"}})
    >>> exc = from_response(r)
    >>> type(exc).__name__, exc.param, exc.request_id
    ('InvalidRequest', 'k', 'req_1')
    """
    envelope = _envelope(response)
    header_id = response.headers.get(REQUEST_ID_HEADER)
    message = _text(envelope.get("message")) or _fallback_message(response)
    cls = error_class(response.status_code)
    return cls(
        message,
        status_code=response.status_code,
        error_type=_text(envelope.get("type")),
        param=_text(envelope.get("param")),
        request_id=_text(envelope.get("request_id")) or header_id,
        retry_after=parse_retry_after(response.headers.get("Retry-After")),
        response=response,
    )


def from_transport_error(exc: httpx.TransportError) -> PlauditError:
    """Wrap an httpx transport failure; the original stays as ``__cause__``."""
    error: PlauditError
    if isinstance(exc, httpx.TimeoutException):
        phase = _TIMEOUT_PHASES.get(type(exc))
        error = PlauditTimeout(f"timed out: {exc or type(exc).__name__}", phase=phase)
    else:
        error = PlauditConnectionError(f"connection failed: {exc or type(exc).__name__}")
    error.__cause__ = exc
    return error


def _envelope(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return {}
    error = body.get("error") if isinstance(body, dict) else None
    return error if isinstance(error, dict) else {}


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def _fallback_message(response: httpx.Response) -> str:
    try:
        text = response.text.strip()
    except (UnicodeDecodeError, httpx.ResponseNotRead):
        text = ""
    return text[:500] or response.reason_phrase or f"HTTP {response.status_code}"
