"""The httpx transport of the OpenAI-compatible backend (see :mod:`.http_transport`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from judges.backends.http_transport import (
    ConnectError,
    HttpReply,
    TransportFailure,
    TransportTimeout,
    encode,
)

_JSON = {"content-type": "application/json"}


class HttpxTransport:
    """One ``httpx.AsyncClient``; no cap on connections (the backend's limiter is the cap)."""

    def __init__(
        self, base_url: str, *, headers: Mapping[str, str] | None = None, timeout_s: float = 60.0
    ) -> None:
        self._client = httpx.AsyncClient(
            base_url=base_url,
            headers=dict(headers or {}),
            timeout=httpx.Timeout(timeout_s, pool=None),
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=None),
        )

    async def post_json(self, path: str, body: Mapping[str, Any]) -> HttpReply:
        return await self._call("POST", path, encode(body))

    async def get(self, path: str) -> HttpReply:
        return await self._call("GET", path, None)

    async def _call(self, method: str, path: str, data: bytes | None) -> HttpReply:
        try:
            response = await self._client.request(
                method, path, content=data, headers=_JSON if data is not None else None
            )
        except httpx.TimeoutException as exc:
            raise TransportTimeout(f"{type(exc).__name__}: {exc}") from exc
        except httpx.ConnectError as exc:
            raise ConnectError(str(exc)) from exc
        except httpx.HTTPError as exc:
            raise TransportFailure(f"{type(exc).__name__}: {exc}") from exc
        found = {k.lower(): v for k, v in response.headers.items()}
        return HttpReply(response.status_code, response.content, found)

    async def aclose(self) -> None:
        await self._client.aclose()
