"""Sync and async HTTP clients for Plaudit, over httpx.

Both retry timeouts, dropped connections, 429, 502, 503 and 504 with exponential backoff and
full jitter (never less than the server's Retry-After), and send one ``Idempotency-Key`` per
logical call, the same on every retry, so the server replays its first answer instead of
scoring (and storing) a group twice.

::

    with PlauditClient("http://127.0.0.1:8000", api_key="trainer-secret") as client:
        out = client.ordinal_advantages([[1, 3, 5, 5]], k=5)

    async with AsyncPlauditClient("http://127.0.0.1:8000") as client:
        out = await client.ordinal_advantages([[1, 3, 5, 5]], k=5)
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from types import TracebackType
from typing import Any, Self

import httpx
from pydantic import BaseModel, ValidationError

from trainer_client._api import Call, Endpoints, JSONObject
from trainer_client.config import RetryPolicy, Timeouts, as_httpx_timeout
from trainer_client.errors import (
    REQUEST_ID_HEADER,
    PlauditError,
    from_response,
    from_transport_error,
)

__all__ = ["DEFAULT_BASE_URL", "AsyncPlauditClient", "PlauditClient"]

log = logging.getLogger(__name__)

DEFAULT_BASE_URL = "http://127.0.0.1:8000"
IDEMPOTENCY_HEADER = "Idempotency-Key"
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_USER_AGENT = "plaudit-trainer-client/0.1"

TimeoutLike = Timeouts | httpx.Timeout | float | None


class _ClientBase:
    """What both clients share: default headers, the retry policy, response checks."""

    def __init__(
        self, api_key: str | None, retry: RetryPolicy | None, headers: Mapping[str, str] | None
    ) -> None:
        self._retry = retry or RetryPolicy()
        self._headers = {"User-Agent": _USER_AGENT, "Accept": "application/json"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._headers.update(headers or {})
        self.last_request_id: str | None = None
        """The ``X-Request-ID`` of the last response this client received (errors included)."""

    @property
    def retry(self) -> RetryPolicy:
        return self._retry

    @staticmethod
    def _call_headers(call: Call) -> dict[str, str]:
        # One key per logical call, generated here, once, and reused by every retry below.
        if call.method in _SAFE_METHODS:
            return {}
        return {IDEMPOTENCY_HEADER: call.idempotency_key or str(uuid.uuid4())}

    def _check(self, response: httpx.Response) -> PlauditError | None:
        self.last_request_id = response.headers.get(REQUEST_ID_HEADER)
        return None if response.is_success else from_response(response)

    def _next_delay(
        self, call: Call, error: PlauditError, retries_done: int, outage_waited: float
    ) -> float | None:
        delay = self._retry.next_delay(error, retries_done, call.max_retries, outage_waited)
        if delay is not None:
            log.warning(
                "plaudit %s %s failed (%s); retry %d in %.2fs",
                call.method,
                call.path,
                type(error).__name__,
                retries_done + 1,
                delay,
            )
        return delay


def _decode(response: httpx.Response) -> Any:
    """The parsed JSON body; the text when the body is not JSON; None when it is empty."""
    if not response.content:
        return None
    if "json" not in response.headers.get("content-type", ""):
        return response.text
    return _json(response)


def _json_object(response: httpx.Response, answer: type[BaseModel] | None = None) -> JSONObject:
    """The answer as a JSON object, checked against the endpoint's wire model when it has one."""
    data = _json(response)
    path = response.request.url.path
    if not isinstance(data, dict):
        kind = type(data).__name__
        raise _unreadable(response, f"expected a JSON object from {path}, got {kind}")
    if answer is not None:
        try:
            answer.model_validate(data)
        except ValidationError as exc:
            wrong = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}"
                for e in exc.errors()[:3]
            )
            message = (
                f"the answer of {path} does not match {answer.__name__} "
                f"(a server of another version?): {wrong}"
            )
            raise _unreadable(response, message) from None
    return data


def _unreadable(response: httpx.Response, message: str) -> PlauditError:
    return PlauditError(
        message,
        status_code=response.status_code,
        request_id=response.headers.get(REQUEST_ID_HEADER),
        response=response,
    )


def _json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError as exc:
        raise PlauditError(
            f"the server's answer is not JSON: {response.text[:200]!r}",
            status_code=response.status_code,
            request_id=response.headers.get(REQUEST_ID_HEADER),
            response=response,
        ) from exc


class PlauditClient(_ClientBase, Endpoints[JSONObject]):
    """A blocking Plaudit client; methods return the parsed JSON answer.

    ``timeout``: a :class:`Timeouts`, an ``httpx.Timeout`` or one number for every phase.
    ``retry``: the :class:`RetryPolicy` (``RetryPolicy(max_retries=0)`` disables retries).
    ``sleep`` waits between retries (tests inject a recorder); ``transport`` replaces httpx's.
    Errors are :class:`~trainer_client.errors.PlauditError` subclasses.

    ::

        with PlauditClient("http://127.0.0.1:8000", timeout=Timeouts(read=300)) as client:
            out = client.ordinal_advantages([[1, 3, 5, 5], [2, 2, 4]], k=5, run_id="run-7")
            print(out["groups"][0]["advantages"], client.last_request_id)
    """

    def __init__(
        self,
        base_url: str = DEFAULT_BASE_URL,
        *,
        api_key: str | None = None,
        timeout: TimeoutLike = Timeouts(),
        retry: RetryPolicy | None = None,
        headers: Mapping[str, str] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        super().__init__(api_key, retry, headers)
        self._sleep = sleep
        self._http = httpx.Client(
            base_url=base_url,
            headers=self._headers,
            timeout=as_httpx_timeout(timeout),
            transport=transport,
        )

    @property
    def base_url(self) -> str:
        return str(self._http.base_url)

    def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> Any:
        """Any endpoint, with the same retries and errors; returns the parsed JSON.

        ::

            client.request("POST", "/v1/ordinal/decompose", json={"scores": [1, 3], "k": 3})
        """
        return _decode(self._send(Call(method.upper(), path, json, params, idempotency_key)))

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _call(self, call: Call) -> JSONObject:
        return _json_object(self._send(call), call.answer)

    def _send(self, call: Call) -> httpx.Response:
        headers = self._call_headers(call)
        retries, outage_waited = 0, 0.0
        while True:
            try:
                response = self._http.request(
                    call.method, call.path, json=call.json, params=call.params, headers=headers
                )
            except httpx.TransportError as exc:
                error = from_transport_error(exc)
            else:
                failure = self._check(response)
                if failure is None:
                    return response
                error = failure
            delay = self._next_delay(call, error, retries, outage_waited)
            if delay is None:
                raise error
            if self._retry.is_outage(error):
                outage_waited += delay
            self._sleep(delay)
            retries += 1


class AsyncPlauditClient(_ClientBase, Endpoints[Awaitable[JSONObject]]):
    """The asyncio twin of :class:`PlauditClient`: the same methods, awaited.

    ::

        async with AsyncPlauditClient("http://127.0.0.1:8000") as client:
            outs = await asyncio.gather(
                *(client.ordinal_advantages([g], k=5) for g in groups)
            )
    """

    def __init__(
        self,
        base_url: str = DEFAULT_BASE_URL,
        *,
        api_key: str | None = None,
        timeout: TimeoutLike = Timeouts(),
        retry: RetryPolicy | None = None,
        headers: Mapping[str, str] | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        super().__init__(api_key, retry, headers)
        self._sleep = sleep
        self._http = httpx.AsyncClient(
            base_url=base_url,
            headers=self._headers,
            timeout=as_httpx_timeout(timeout),
            transport=transport,
        )

    @property
    def base_url(self) -> str:
        return str(self._http.base_url)

    async def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> Any:
        """Any endpoint, with the same retries and errors; returns the parsed JSON."""
        call = Call(method.upper(), path, json, params, idempotency_key)
        return _decode(await self._send(call))

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def _call(self, call: Call) -> JSONObject:
        return _json_object(await self._send(call), call.answer)

    async def _send(self, call: Call) -> httpx.Response:
        headers = self._call_headers(call)
        retries, outage_waited = 0, 0.0
        while True:
            try:
                response = await self._http.request(
                    call.method, call.path, json=call.json, params=call.params, headers=headers
                )
            except httpx.TransportError as exc:
                error = from_transport_error(exc)
            else:
                failure = self._check(response)
                if failure is None:
                    return response
                error = failure
            delay = self._next_delay(call, error, retries, outage_waited)
            if delay is None:
                raise error
            if self._retry.is_outage(error):
                outage_waited += delay
            await self._sleep(delay)
            retries += 1
