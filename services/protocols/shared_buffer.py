"""A group buffer on Redis, so replicas behind a load balancer gather a prompt's samples together
(issue 10: with the per-process buffer, two replicas split every group).

Each group lives under ``plaudit:buffer:<group id>:<generation>``: its items in arrival order
(each with a random id), and, once scored, its results by item id. A caller appends its items
atomically (a Lua script), learning whether they filled the group. Whoever fills the group,
or, when the wait runs out first, whoever closes it (another atomic step, so exactly one
caller does), scores the whole group on its own replica and writes the results; every other
caller, on any replica, polls for them (every 50 ms at first, slowing to 0.5 s) and takes its
own. Closing a group moves the generation on, so the next samples of the same key start a new
group, as in the per-process buffer.

A group may also settle (:class:`~services.protocols.buffer.Settle`, for evaluation groups):
the caller whose items brought it to exactly the settle size checks, once the settle time has
passed, that nothing joined since (Redis's clock, another atomic step) and then scores it.

A caller that goes away while its group is still open takes its items out of it (atomically,
so the group never counts them), even when it goes while its items are being added; once a caller
has closed a group, the scoring runs in a task of its own, so the caller going away never leaves
the others waiting for results that will not come. What is not shared: the memory of recently
scored groups used for stragglers (``RecentGroups``) stays per process.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Generic, TypeVar

import redis.asyncio as aioredis

from services.core.errors import BackendUnavailable
from services.protocols.buffer import Settle

log = logging.getLogger(__name__)

K = TypeVar("K")
R = TypeVar("R")

#: An atomic step on Redis: a registered script, its keys and its arguments.
_Step = tuple[Any, list[str], list[Any]]

PREFIX = "plaudit:buffer:"

# Redis's clock in milliseconds, so that replicas with skewed clocks agree on settle times.
_NOW_MS = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
"""

# KEYS[1]: the group's generation counter. ARGV: size, ttl in ms, then the items.
# Returns {generation, 1 when these items filled the group, the group's count}.
_JOIN = (
    _NOW_MS
    + """
local gen = redis.call('GET', KEYS[1])
if not gen then
  gen = '0'
  redis.call('SET', KEYS[1], gen)
end
local items = KEYS[1] .. ':' .. gen .. ':items'
local n = 0
for i = 3, #ARGV do
  n = redis.call('RPUSH', items, ARGV[i])
end
redis.call('PEXPIRE', items, ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('SET', items .. ':last', now, 'PX', ARGV[2])
local full = 0
if n >= tonumber(ARGV[1]) then
  redis.call('INCR', KEYS[1])
  full = 1
end
return {gen, full, n}
"""
)

# KEYS[1]: the generation counter. ARGV: the generation, the settle size, the settle time in
# ms. Closes the group when it still holds exactly that many items and none joined for that
# long: 1 when it did; 0 when it no longer can (closed, or another count); otherwise minus the
# milliseconds left to wait.
_SETTLE = (
    _NOW_MS
    + """
local gen = redis.call('GET', KEYS[1])
if gen ~= ARGV[1] then
  return 0
end
local items = KEYS[1] .. ':' .. gen .. ':items'
if redis.call('LLEN', items) ~= tonumber(ARGV[2]) then
  return 0
end
local last = tonumber(redis.call('GET', items .. ':last') or '0')
local left = last + tonumber(ARGV[3]) - now
if left > 0 then
  return -left
end
redis.call('INCR', KEYS[1])
return 1
"""
)

# KEYS[1]: the generation counter; ARGV[1]: the generation to close. 1 when this call closed it.
_CLOSE = """
local gen = redis.call('GET', KEYS[1])
if gen == ARGV[1] then
  redis.call('INCR', KEYS[1])
  return 1
end
return 0
"""

# KEYS[1]: the generation counter; ARGV[1]: the generation, then the caller's entries. Takes
# them out of the group while it is still open; 1 when it did.
_WITHDRAW = """
local gen = redis.call('GET', KEYS[1])
if gen ~= ARGV[1] then
  return 0
end
local items = KEYS[1] .. ':' .. gen .. ':items'
for i = 2, #ARGV do
  redis.call('LREM', items, 1, ARGV[i])
end
return 1
"""


class RedisGroupBuffer(Generic[K, R]):
    """The :class:`~services.protocols.buffer.GroupBuffer` interface, shared through Redis.

    ``group_id(key)`` names a group across processes (the same for equal keys); ``encode`` and
    ``decode`` carry results through Redis as JSON-ready values.
    """

    def __init__(
        self,
        redis_url: str,
        score: Callable[[K, list[str]], Awaitable[list[R]]],
        *,
        group_id: Callable[[K], str],
        encode: Callable[[R], Any],
        decode: Callable[[Any], R],
        result_wait_s: float = 600.0,
        poll_s: float = 0.05,
        max_poll_s: float = 0.5,
        timeout_s: float = 5.0,
    ) -> None:
        # Timeouts: a Redis that stops answering is an outage (503), not a request that hangs.
        self._redis = aioredis.from_url(  # type: ignore[no-untyped-call]
            redis_url,
            decode_responses=True,
            socket_timeout=timeout_s,
            socket_connect_timeout=timeout_s,
        )
        self._score = score
        self._group_id = group_id
        self._encode = encode
        self._decode = decode
        self._result_wait_s = result_wait_s
        self._poll_s = poll_s
        self._max_poll_s = max(poll_s, max_poll_s)
        self._join = self._redis.register_script(_JOIN)
        self._close = self._redis.register_script(_CLOSE)
        self._withdraw = self._redis.register_script(_WITHDRAW)
        self._settle = self._redis.register_script(_SETTLE)
        self._scoring: set[asyncio.Task[dict[str, Any]]] = set()

    async def submit(
        self,
        key: K,
        items: Sequence[str],
        *,
        size: int,
        wait_s: float,
        settle: Settle | None = None,
    ) -> list[R]:
        """Join ``key``'s open group with ``items``; their results once the group is scored."""
        if not items:
            return []
        counter = PREFIX + self._group_id(key)
        ttl_ms = int((wait_s + self._result_wait_s) * 1000)
        ids = [uuid.uuid4().hex for _ in items]
        entries = [json.dumps({"id": i, "text": t}) for i, t in zip(ids, items, strict=True)]
        joining = asyncio.ensure_future(self._join(keys=[counter], args=[size, ttl_ms, *entries]))
        try:
            gen, full, count = await asyncio.shield(joining)
        except asyncio.CancelledError:
            # Gone while joining: the items may be in already, so take them out (or, when they
            # filled the group, score it for the others).
            await asyncio.shield(self._leave_after_join(joining, key, counter, entries, ttl_ms))
            raise
        base = f"{counter}:{gen}"
        if int(full):
            return self._pick(await asyncio.shield(self._lead(key, base, ttl_ms)), ids)
        # Only the caller that brought the group to the settle size watches for it to settle.
        settle_at = (
            time.monotonic() + settle.after_s
            if settle is not None and int(count) == settle.size
            else None
        )
        try:
            deadline = time.monotonic() + wait_s
            pause = self._poll_s
            while time.monotonic() < deadline:
                results = await self._results(base)
                if results is not None:
                    return self._pick(results, ids)
                if settle is not None and settle_at is not None and time.monotonic() >= settle_at:
                    claim = self._claim(key, base, ttl_ms, self._settle_args(counter, gen, settle))
                    settled = await asyncio.shield(claim)
                    if isinstance(settled, asyncio.Task):
                        log.info("group %s settled at %d of %d items", base, settle.size, size)
                        return self._pick(await asyncio.shield(settled), ids)
                    settle_at = None if settled == 0 else time.monotonic() - settled / 1000
                await asyncio.sleep(min(pause, max(0.0, deadline - time.monotonic())))
                pause = self._next_pause(pause)
            claim = self._claim(key, base, ttl_ms, (self._close, [counter], [gen]))
            closed = await asyncio.shield(claim)
        except asyncio.CancelledError:
            # The caller went away: out of the group, unless it is already being scored.
            await asyncio.shield(self._withdraw(keys=[counter], args=[gen, *entries]))
            raise
        if isinstance(closed, asyncio.Task):
            log.debug("group %s reached its deadline; scoring it here", base)
            return self._pick(await asyncio.shield(closed), ids)
        return await self._follow(base, ids)

    async def aclose(self) -> None:
        for task in list(self._scoring):
            task.cancel()
        await asyncio.gather(*self._scoring, return_exceptions=True)
        await self._redis.aclose()

    def _settle_args(self, counter: str, gen: str, settle: Settle) -> _Step:
        return (self._settle, [counter], [gen, settle.size, int(settle.after_s * 1000)])

    def _claim(
        self, key: K, base: str, ttl_ms: int, step: _Step
    ) -> asyncio.Task[int | asyncio.Task[dict[str, Any]]]:
        """Run an atomic step that may close the group (settle, deadline); when it does, the
        scoring starts in the same breath, so a caller cancelled meanwhile never leaves a closed
        group unscored. The scoring task when it closed the group, else the step's answer."""

        async def run() -> int | asyncio.Task[dict[str, Any]]:
            script, keys, args = step
            answer = int(await script(keys=keys, args=args))
            return self._lead(key, base, ttl_ms) if answer == 1 else answer

        return asyncio.ensure_future(run())

    async def _leave_after_join(
        self, joining: asyncio.Future[Any], key: K, counter: str, entries: list[str], ttl_ms: int
    ) -> None:
        try:
            gen, full, _ = await joining
        except Exception:  # the join itself failed: nothing of ours is in the group
            return
        if int(full):
            self._lead(key, f"{counter}:{gen}", ttl_ms)
        else:
            await self._withdraw(keys=[counter], args=[gen, *entries])

    def _lead(self, key: K, base: str, ttl_ms: int) -> asyncio.Task[dict[str, Any]]:
        """Score the whole (closed) group and publish its results, in a task of its own: the
        other callers wait on Redis for them, so the caller that closed the group going away
        must not stop it."""
        task = asyncio.get_running_loop().create_task(self._score_group(key, base, ttl_ms))
        self._scoring.add(task)
        task.add_done_callback(self._scoring.discard)
        task.add_done_callback(_note_failure)
        return task

    async def _score_group(self, key: K, base: str, ttl_ms: int) -> dict[str, Any]:
        entries = [json.loads(e) for e in await self._redis.lrange(base + ":items", 0, -1)]
        try:
            results = await self._score(key, [e["text"] for e in entries])
        except Exception as exc:
            message = str(exc) or type(exc).__name__
            await self._redis.set(base + ":result", json.dumps({"error": message}), px=ttl_ms)
            raise
        payload = {
            "results": {e["id"]: self._encode(r) for e, r in zip(entries, results, strict=True)}
        }
        await self._redis.set(base + ":result", json.dumps(payload), px=ttl_ms)
        return payload

    async def _follow(self, base: str, ids: list[str]) -> list[R]:
        """Wait for the replica that closed the group to publish its results."""
        deadline = time.monotonic() + self._result_wait_s
        pause = self._poll_s
        while time.monotonic() < deadline:
            results = await self._results(base)
            if results is not None:
                return self._pick(results, ids)
            await asyncio.sleep(pause)
            pause = self._next_pause(pause)
        raise BackendUnavailable(
            "the replica scoring this sample's group gave no answer in time", retry_after=5
        )

    def _next_pause(self, pause: float) -> float:
        """Polls start quick (a group usually completes within moments) and slow down to
        ``max_poll_s``, so that hundreds of waiting samples do not flood Redis."""
        return min(pause * 1.5, self._max_poll_s)

    async def _results(self, base: str) -> dict[str, Any] | None:
        raw = await self._redis.get(base + ":result")
        if raw is None:
            return None
        payload: dict[str, Any] = json.loads(raw)
        return payload

    def _pick(self, payload: dict[str, Any], ids: list[str]) -> list[R]:
        if "error" in payload:
            raise BackendUnavailable(
                f"scoring this sample's group failed: {payload['error']}", retry_after=5
            )
        return [self._decode(payload["results"][i]) for i in ids]


def _note_failure(task: asyncio.Task[Any]) -> None:
    """Retrieve a scoring failure, so asyncio does not warn when no caller awaited the task
    (its caller went away); the other callers read it from Redis."""
    if not task.cancelled() and task.exception() is not None:
        log.debug("scoring a group failed: %s", task.exception())
