"""The checks a request passes before the app reads its body, and its deadline (issue 9).

In order: the app's limits are put in force for the request; a body announced larger than
``limits.max_body_bytes`` is refused with 413 before a byte is read, and a body that grows past it
while streaming (no Content-Length) is cut off with 413; the request then runs under
``limits.request_timeout_s`` and is answered 504 ``deadline_exceeded`` when it runs out.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from fastapi import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from services.core.envelope import error_response
from services.core.errors import DeadlineExceeded, PayloadTooLarge, PlauditError
from services.core.limits import reset_limits, use_limits
from services.core.metrics import Metrics
from services.core.reliability_settings import LimitsSettings

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
        limits: LimitsSettings = scope["app"].state.settings.limits
        token = use_limits(limits)
        try:
            refusal = _check_length(scope, limits.max_body_bytes)
            if refusal is not None:
                await self._refuse(refusal, scope, receive, send)
                return
            bounded = _bounded_receive(receive, limits.max_body_bytes)
            await self._run_with_deadline(scope, bounded, send, limits.request_timeout_s)
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


def _bounded_receive(receive: Receive, limit: int) -> Receive:
    """``receive`` that stops a body growing past ``limit`` bytes with a 413."""
    seen = {"bytes": 0}

    async def bounded() -> Any:
        message = await receive()
        if message["type"] == "http.request":
            seen["bytes"] += len(message.get("body", b""))
            if seen["bytes"] > limit:
                # Raised inside the app's body read; FastAPI passes HTTPExceptions through to
                # the envelope handler.
                raise HTTPException(413, _too_large(limit))
        return message

    return bounded
