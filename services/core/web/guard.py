"""The checks a request passes before the app reads its body, and its deadline (issue 9).

The app's limits are put in force for the request, and a server without API keys refuses
non-loopback callers. When the routed app first asks for the body, the caller's key is checked
against the route's scope (401/403) and a body announced larger than ``limits.max_body_bytes`` is
refused (413), so neither a bad key nor a huge body is ever read; a body that grows past the
limit while streaming is cut off with 413. The request runs under ``limits.request_timeout_s``
and is answered 504 ``deadline_exceeded`` when it runs out.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from fastapi import HTTPException
from starlette.requests import HTTPConnection
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from services.core.errors import DeadlineExceeded, PayloadTooLarge, PlauditError
from services.core.metrics import Metrics
from services.core.settings import CoreSettings
from services.core.web.auth import refuse_caller, refuse_open_server
from services.core.web.envelope import error_response
from services.core.web.limits import reset_limits, use_limits

log = logging.getLogger(__name__)


def _too_large(limit: int) -> str:
    return f"the request body exceeds {limit} bytes (PLAUDIT_LIMITS_MAX_BODY_BYTES)"


class GuardMiddleware:
    """Body size, limits in force and the per-request deadline; see the module docstring."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        settings: CoreSettings = scope["app"].state.settings
        limits = settings.limits
        token = use_limits(limits)
        try:
            refusal = refuse_open_server(HTTPConnection(scope), settings)
            if refusal is not None:
                await self._refuse(refusal, scope, receive, send)
                return
            guarded = _guarded_receive(scope, receive, settings)
            await self._run_with_deadline(scope, guarded, send, limits.request_timeout_s)
        finally:
            reset_limits(token)

    async def _run_with_deadline(
        self, scope: Scope, receive: Receive, send: Send, deadline_s: float
    ) -> None:
        started = {"sent": False}

        async def tracking_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                started["sent"] = True
            await send(message)

        try:
            async with asyncio.timeout(deadline_s):
                await self.app(scope, receive, tracking_send)
        except TimeoutError:
            if started["sent"]:
                raise
            log.warning("request stopped at its deadline of %.0f s", deadline_s)
            error = DeadlineExceeded(
                f"the request did not finish within {deadline_s:g} s "
                "(PLAUDIT_LIMITS_REQUEST_TIMEOUT_S)",
                retry_after=1,
            )
            await self._refuse(error, scope, receive, send)

    async def _refuse(
        self, error: PlauditError, scope: Scope, receive: Receive, send: Send
    ) -> None:
        self.metrics.errors.labels(error.error_type).inc()
        response = error_response(
            error.status_code, error.error_type, error.message, error.param, error.headers
        )
        await response(scope, receive, send)


def _check_length(scope: Scope, limit: int) -> PlauditError | None:
    for name, value in scope["headers"]:
        if name == b"content-length" and value.isdigit() and int(value) > limit:
            return PayloadTooLarge(_too_large(limit))
    return None


def _guarded_receive(scope: Scope, receive: Receive, settings: CoreSettings) -> Receive:
    """``receive`` that checks the caller and the announced size before the first read, and
    stops a body growing past the limit."""
    limit = settings.limits.max_body_bytes
    seen = {"bytes": 0, "checked": False}

    async def guarded() -> Any:
        if not seen["checked"]:
            seen["checked"] = True
            refusal = refuse_caller(HTTPConnection(scope), settings) or _check_length(scope, limit)
            if refusal is not None:
                _raise(refusal)
        message = await receive()
        if message["type"] == "http.request":
            seen["bytes"] += len(message.get("body", b""))
            if seen["bytes"] > limit:
                _raise(PayloadTooLarge(_too_large(limit)))
        return message

    return guarded


def _raise(error: PlauditError) -> None:
    # Raised inside the app's body read, where FastAPI passes HTTPExceptions on to the envelope
    # handler (any other exception there would become a 400).
    raise HTTPException(error.status_code, error.message, headers=error.headers or None)
