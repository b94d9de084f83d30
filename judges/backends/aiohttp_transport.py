"""The aiohttp transport of the OpenAI-compatible backend (see :mod:`.http_transport`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import aiohttp

from judges.backends.http_transport import (
    ConnectError,
    HttpReply,
    TransportFailure,
    TransportTimeout,
    encode,
)

_JSON = {"content-type": "application/json"}


class AiohttpTransport:
    """One ``aiohttp.ClientSession``, made on first use (it must be made on a running loop).

    The connector has no connection cap (``limit=0``: the backend's limiter is the cap) and
    keeps idle connections for 30 s.
    """

    def __init__(
        self, base_url: str, *, headers: Mapping[str, str] | None = None, timeout_s: float = 60.0
    ) -> None:
        self._base = base_url.rstrip("/") + "/"
        self._headers = dict(headers or {})
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._session: aiohttp.ClientSession | None = None

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=30)
            self._session = aiohttp.ClientSession(
                connector=connector, headers=self._headers, timeout=self._timeout
            )
        return self._session

    async def post_json(self, path: str, body: Mapping[str, Any]) -> HttpReply:
        return await self._call("POST", path, encode(body))

    async def get(self, path: str) -> HttpReply:
        return await self._call("GET", path, None)

    async def _call(self, method: str, path: str, data: bytes | None) -> HttpReply:
        headers = _JSON if data is not None else None
        try:
            async with self._open().request(
                method, self._base + path, data=data, headers=headers
            ) as response:
                content = await response.read()
                found = {k.lower(): v for k, v in response.headers.items()}
                return HttpReply(response.status, content, found)
        except TimeoutError as exc:
            raise TransportTimeout(str(exc) or "no answer in time") from exc
        except aiohttp.ClientConnectorError as exc:
            raise ConnectError(str(exc)) from exc
        except aiohttp.ClientError as exc:
            raise TransportFailure(f"{type(exc).__name__}: {exc}") from exc

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
