"""ASGI middleware: request ids, per-route latency, and the last line of defence for errors.

Unexpected exceptions are logged with their traceback here and answered with the envelope, so
no traceback ever reaches a client.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from services.core.context import REQUEST_ID_HEADER, clean_request_id, request_id_var
from services.core.metrics import Metrics
from services.core.web.access import close_note, open_note
from services.core.web.envelope import error_body

log = logging.getLogger(__name__)


class RequestContextMiddleware:
    """Assigns a request id, times the request and turns crashes into a 500 envelope."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        request_id = clean_request_id(headers.get(REQUEST_ID_HEADER.lower()))
        token = request_id_var.set(request_id)
        scope.setdefault("state", {})["request_id"] = request_id
        started = time.perf_counter()
        status = {"code": 500, "sent": False}
        note = open_note()

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
                status["sent"] = True
                raw = list(message.get("headers", []))
                raw.append((REQUEST_ID_HEADER.lower().encode(), request_id.encode()))
                message["headers"] = raw
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        except Exception:
            log.exception("unhandled error on %s %s", scope.get("method"), scope.get("path"))
            self.metrics.errors.labels("internal_error").inc()
            if not status["sent"]:
                await _send_internal_error(send_with_id, request_id)
        finally:
            seconds = time.perf_counter() - started
            method, template = self._observe(scope, int(status["code"]), seconds)
            close_note(note, method, template, int(status["code"]), seconds)
            request_id_var.reset(token)

    def _observe(self, scope: Scope, status: int, seconds: float) -> tuple[str, str]:
        route: Any = scope.get("route")
        template = getattr(route, "path", None) or "unmatched"
        method = str(scope.get("method", "GET"))
        self.metrics.request_latency.labels(method, template, str(status)).observe(seconds)
        return method, template


async def _send_internal_error(send: Send, request_id: str) -> None:
    body = json.dumps(
        error_body("internal_error", "internal server error", None, request_id)
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 500,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
