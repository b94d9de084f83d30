"""A content-addressed cache in front of a judge backend, with in-flight sharing.

The key hashes everything that decides a verdict: backend, model id, how choices are scored
(``choice_mode``, ``choice_scoring``, ``compat`` of the backend's details), the operation, its
parameters and the full rendered messages (which carry the template version). A choice result
that a server answered without logprobs (a parsed verdict, ``coverage`` None) from a backend
that asks for logprobs is not stored: the next call asks again rather than replaying a one-hot
verdict as if it were probabilities (issue 19), and it is counted in
``plaudit_judge_verdict_fallback_total``. Identical
requests that arrive while one is being computed wait for that one instead of calling the
backend again. Only successful results are cached; failures are retried next time.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import hashlib
import json
import logging
import math
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import orjson

from judges.backends.base import (
    ChoiceRequest,
    ChoiceResult,
    GeneratedText,
    GenerateRequest,
    GenerateResult,
    JudgeBackend,
)
from services.core.cache import Cache
from services.core.errors import CacheUnavailable
from services.core.metrics import Metrics

log = logging.getLogger(__name__)

Req = TypeVar("Req", ChoiceRequest, GenerateRequest)
_SCORING_DETAILS = ("choice_mode", "choice_scoring", "compat")
Res = TypeVar("Res", ChoiceResult, GenerateResult)


class CachedJudge:
    """Wraps a :class:`JudgeBackend`; same calls plus ``use_cache``."""

    def __init__(
        self,
        backend: JudgeBackend,
        cache: Cache,
        *,
        ttl: float | None = 7 * 24 * 3600,
        metrics: Metrics | None = None,
    ) -> None:
        self.backend = backend
        self._cache = cache
        self._ttl = ttl
        self._metrics = metrics
        self._inflight: dict[str, asyncio.Future[Any]] = {}
        self._cache_reachable = True
        self._frames: dict[bytes, _KeyFrame] = {}

    def key(self, op: str, request: ChoiceRequest | GenerateRequest) -> str:
        """The cache key of one request: ``judge:`` and the SHA-256 of the sorted JSON of
        the backend, model, scoring details, operation and the request's fields."""
        return self._keyer(op)(request)

    def _keyer(self, op: str) -> Callable[[ChoiceRequest | GenerateRequest], str]:
        """:meth:`key` for every request of one batch: what the backend contributes is read
        and hashed once, and each request adds only its own fields (issue 19)."""
        info = self.backend.info
        payload = {
            "backend": info.name,
            "model": info.model_id,
            "scoring": {k: info.details.get(k) for k in _SCORING_DETAILS},
            "op": op,
            "request": _SPLICE,
        }
        text = key_text(payload)  # what the frame stands for, byte for byte
        frame = self._frames.get(text)
        if frame is None:
            if len(self._frames) >= _MAX_FRAMES:
                self._frames.clear()
            frame = self._frames[text] = _KeyFrame.of(text, payload)
        return frame.key

    async def score_choices(
        self, requests: Sequence[ChoiceRequest], *, use_cache: bool = True
    ) -> list[ChoiceResult]:
        if not use_cache:
            return await self.backend.score_choices(requests)
        return await self._run("choices", requests, self.backend.score_choices, ChoiceResult)

    async def generate(
        self, requests: Sequence[GenerateRequest], *, use_cache: bool = True
    ) -> list[GenerateResult]:
        # A sample at temperature > 0 without a seed is meant to differ each time.
        cacheable = use_cache and all(r.temperature == 0 or r.seed is not None for r in requests)
        if not cacheable:
            return await self.backend.generate(requests)
        return await self._run("generate", requests, self.backend.generate, GenerateResult)

    async def _run(
        self,
        op: str,
        requests: Sequence[Req],
        call: Callable[[Sequence[Req]], Awaitable[list[Res]]],
        result_type: type[Res],
    ) -> list[Res]:
        keyer = self._keyer(op)
        keys = [keyer(r) for r in requests]
        results: dict[str, Res] = {}
        waiting: dict[str, asyncio.Future[Any]] = {}
        owned: dict[str, asyncio.Future[Any]] = {}
        todo: dict[str, Req] = {}
        loop = asyncio.get_running_loop()
        # Claim every key before the first await, so a request arriving during our cache
        # lookup waits for us instead of calling the backend a second time.
        for key, request in zip(keys, requests, strict=True):
            if key in owned or key in waiting:
                continue
            if key in self._inflight:
                waiting[key] = self._inflight[key]
            else:
                owned[key] = self._inflight[key] = loop.create_future()
                todo[key] = request
        try:
            found = await self._lookup(list(todo))
            hits = 0
            for key, cached in zip(list(todo), found, strict=True):
                if cached is not None:
                    results[key] = _decode(result_type, cached)
                    owned[key].set_result(results[key])
                    del todo[key]
                    hits += 1
            self._count("hit", hits)
            if todo:
                await self._compute(todo, call, results, owned)
        except BaseException as exc:
            for future in owned.values():
                if not future.done():
                    future.set_exception(exc)
                    future.exception()  # mark retrieved: waiters re-raise it themselves
            raise
        finally:
            for key in owned:
                self._inflight.pop(key, None)
        for key, future in waiting.items():
            results[key] = await asyncio.shield(future)
        self._count("shared", len(waiting))
        return [results[k] for k in keys]

    async def _compute(
        self,
        todo: dict[str, Req],
        call: Callable[[Sequence[Req]], Awaitable[list[Res]]],
        results: dict[str, Res],
        futures: dict[str, asyncio.Future[Any]],
    ) -> None:
        computed = await call(list(todo.values()))
        keep: dict[str, bytes] = {}
        for key, result in zip(todo, computed, strict=True):
            results[key] = result
            futures[key].set_result(result)
            if self._fell_back(result):
                if self._metrics is not None:
                    self._metrics.judge_verdict_fallback.inc()
            elif result.status == "ok":
                keep[key] = _encode(result)
        self._count("miss", len(computed))
        await self._store(keep)

    def _fell_back(self, result: ChoiceResult | GenerateResult) -> bool:
        """A choice result parsed from a reply although logprobs were asked for."""
        return (
            isinstance(result, ChoiceResult)
            and result.ok
            and result.coverage is None
            and self.backend.info.supports_logprobs
        )

    async def _lookup(self, keys: list[str]) -> list[bytes | None]:
        """The cached verdicts, in one round trip; Nones also when the cache is down (the
        judge works without it)."""
        if not keys:
            return []
        try:
            values = await self._cache.get_many(keys)
        except CacheUnavailable:
            self._cache_down()
            return [None] * len(keys)
        self._cache_reachable = True
        return values

    async def _store(self, items: dict[str, bytes]) -> None:
        if not items:
            return
        try:
            await self._cache.set_many(items, self._ttl)
        except CacheUnavailable:
            self._cache_down()

    def _cache_down(self) -> None:
        # Issue 9: Redis down must not fail judging; the metric shows how often it happened.
        self._count("unavailable")
        if self._cache_reachable:
            log.warning("the judge cache is unavailable; judging without it")
        self._cache_reachable = False

    def _count(self, outcome: str, calls: int = 1) -> None:
        """Count ``calls`` lookups that ended in ``outcome``: once per batch, not per prompt."""
        if self._metrics is not None and calls:
            self._metrics.judge_cache.labels(outcome).inc(calls)


_SPLICE = "\u0001plaudit: the request goes here\u0001"
_MAX_FRAMES = 64  # (operation, backend, model, scoring) combinations kept per judge


@dataclasses.dataclass(frozen=True)
class _KeyFrame:
    """The key text around the request: ``{"backend":..,"model":..,"op":..,"request":``,
    then the request's fields, then ``,"scoring":{..}}``. JSON nests, so the request's text
    alone is what it is inside the payload; the head is hashed once and each key copies
    that state (the same bytes and digest as hashing the whole text)."""

    head: Any  # hashlib's sha256 state after the head
    tail: bytes
    whole: dict[str, Any] | None  # the payload, when the splice mark cannot be found once

    @classmethod
    def of(cls, text: bytes, payload: dict[str, Any]) -> _KeyFrame:
        """The frame of ``payload``, whose key text is ``text``."""
        mark = json.dumps(_SPLICE).encode()
        if text.count(mark) != 1:  # a name or scoring detail that is the mark itself
            return cls(hashlib.sha256(), b"", payload)
        head, tail = text.split(mark)
        return cls(hashlib.sha256(head), tail, None)

    def key(self, request: ChoiceRequest | GenerateRequest) -> str:
        # A RenderedPrompt is its own ChoiceRequest: only the request's fields count.
        fields = _fields(request, ChoiceRequest if isinstance(request, ChoiceRequest) else None)
        if self.whole is not None:
            return (
                f"judge:{hashlib.sha256(key_text({**self.whole, 'request': fields})).hexdigest()}"
            )
        digest = self.head.copy()
        digest.update(key_text(fields))
        digest.update(self.tail)
        return f"judge:{digest.hexdigest()}"


def key_text(payload: dict[str, Any]) -> bytes:
    """``payload`` as the sorted, compact ``json.dumps`` text that the keys hash.

    orjson writes the same bytes for strings of ASCII other than DEL, ints, booleans, None,
    lists and dicts; floats (whose digits the two libraries write differently) and other
    types go through ``json.dumps``. A choice request's payload is all strings. A G=8 group
    hashes 56 keys and this is most of each one's CPU (issue 19); the text is pinned, so
    that replicas and releases share the cache (test_cached_keys.py).
    """
    if _only_plain(payload):
        try:  # not contextlib.suppress: this runs for every judged prompt
            raw = orjson.dumps(payload, option=orjson.OPT_SORT_KEYS)
        except orjson.JSONEncodeError:
            pass
        else:
            if raw.isascii() and b"\x7f" not in raw:
                return raw
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=list)
    return text.encode()


_PLAIN = {str, int, bool, type(None)}
_MAX_ITEMS = 100_000


def _only_plain(value: Any) -> bool:
    """True when ``value`` is made of dicts, lists and tuples of strings, ints, booleans
    and None (a loop, not a recursion: it runs for every judged prompt). False past
    ``_MAX_ITEMS`` items, so a structure that holds itself ends here too."""
    stack = [value]
    for _ in range(_MAX_ITEMS):
        if not stack:
            return True
        item = stack.pop()
        kind = type(item)
        if kind in _PLAIN:
            continue
        if kind is dict:
            stack.extend(item.values())
        elif kind is list or kind is tuple:
            stack.extend(item)
        else:
            return False
    return False


def _fields(item: Any, as_type: type | None = None) -> dict[str, Any]:
    """A dataclass's fields by name (those of ``as_type`` when given, for a subclass),
    values as they are (no deep copy)."""
    return {name: getattr(item, name) for name in _field_names(as_type or type(item))}


@functools.cache
def _field_names(kind: type) -> tuple[str, ...]:
    return tuple(field.name for field in dataclasses.fields(kind))


def _encode(result: ChoiceResult | GenerateResult) -> bytes:
    """A result as the JSON the cache stores.

    orjson, faster than :mod:`json` (56 results per G=8 group on the rewards
    route, issue 19), when every float is finite: orjson would write NaN and -inf (an
    unlisted candidate's log-probability) as null, so such a result goes through
    :func:`json.dumps`, which writes them as ``NaN`` and ``-Infinity``.
    """
    data = _fields(result)
    if isinstance(result, GenerateResult):
        data["samples"] = [_fields(sample) for sample in result.samples]
        finite = True
    else:
        finite = math.isfinite(sum(result.logprobs) + sum(result.probs) + (result.coverage or 0.0))
    if finite:
        # orjson also refuses a lone surrogate, which a server's escaped JSON can carry
        with contextlib.suppress(orjson.JSONEncodeError):
            return orjson.dumps(data)
    return json.dumps(data).encode()


def _decode(result_type: type[Res], raw: bytes) -> Res:
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:  # NaN or -Infinity, written by json.dumps
        data = json.loads(raw)
    for name, value in data.items():
        if name == "samples":  # GenerateResult's samples: GeneratedText fields
            data[name] = tuple(GeneratedText(**sample) for sample in value)
        elif isinstance(value, list):
            data[name] = tuple(value)
    return result_type(**data)
