"""The bounded hand-off from scoring to the memory: never blocks, never fails a request.

``offer`` puts a group on an in-process queue (``put_nowait``); when the queue is full the
group is dropped and counted (``plaudit_memory_ingest_dropped_total{reason="queue_full"}``).
One consumer task takes groups off the queue and records them, in its own context (no
request's principal or write buffer leaks into it). A transient failure (a briefly locked
SQLite file, a dropped database connection) is retried with backoff; a group that still cannot
be stored is dropped, counted (``reason="store_failed"``) and its reason kept for
``GET /v1/memory/ingest`` (issue 23, finding 5: nothing accepted is dropped silently).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections import Counter as Tally
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge
from sqlalchemy.exc import OperationalError

from services.core.outages import is_database_outage

log = logging.getLogger(__name__)
T = TypeVar("T")


QUEUE_FULL = "queue_full"
STORE_FAILED = "store_failed"


@dataclass(frozen=True)
class Retry:
    """How a transient failure to store a group is retried: ``attempts`` tries in all,
    waiting ``first_wait_s`` and doubling."""

    attempts: int = 4
    first_wait_s: float = 0.2


def is_transient(exc: BaseException) -> bool:
    """A failure that may pass: the database is unreachable for a moment, or SQLite's file is
    locked by another writer ("database is locked")."""
    if is_database_outage(exc):
        return True
    return isinstance(exc, OperationalError) and "locked" in str(exc.orig).lower()


class IngestQueue(Generic[T]):
    """``offer(item) -> bool`` (False: dropped); ``handle`` runs on each item in order."""

    def __init__(
        self,
        handle: Callable[[T], Awaitable[None]],
        *,
        size: int,
        registry: CollectorRegistry | None = None,
        retry: Retry | None = None,
    ) -> None:
        self._handle = handle
        self._retry = retry or Retry()
        self._queue: asyncio.Queue[T] = asyncio.Queue(maxsize=size)
        self._task: asyncio.Task[None] | None = None
        self._idle = asyncio.Event()
        self._idle.set()
        self.accepted = 0
        self.retried = 0
        self.drops: Tally[str] = Tally()
        """Dropped groups by reason (``queue_full``, ``store_failed``)."""
        self.last_drop: str | None = None
        """Why the latest group that could not be stored was dropped."""
        self._dropped = Counter(
            "plaudit_memory_ingest_dropped",
            "Scored groups the evaluation memory dropped: its ingest queue was full "
            "(queue_full), or storing failed after retries (store_failed)",
            ["reason"],
            registry=registry,
        )
        self._taken = Counter(
            "plaudit_memory_ingest_accepted",
            "Scored groups queued for the evaluation memory",
            registry=registry,
        )
        self._depth = Gauge(
            "plaudit_memory_ingest_queue_depth",
            "Scored groups waiting for the evaluation memory",
            registry=registry,
        )

    def offer(self, item: T) -> bool:
        """Queue ``item`` at once, or drop and count it when the queue is full."""
        try:
            self._queue.put_nowait(item)
        except asyncio.QueueFull:
            self._drop(QUEUE_FULL, f"the ingest queue was full ({self._queue.maxsize} groups)")
            return False
        self.accepted += 1
        self._taken.inc()
        self._depth.set(self._queue.qsize())
        self._idle.clear()
        self._ensure_consumer()
        return True

    @property
    def depth(self) -> int:
        return self._queue.qsize()

    @property
    def dropped(self) -> int:
        return sum(self.drops.values())

    def _drop(self, reason: str, detail: str) -> None:
        self.drops[reason] += 1
        self._dropped.labels(reason=reason).inc()
        if reason != QUEUE_FULL:
            self.last_drop = detail[:500]

    async def drained(self) -> None:
        """Wait until every queued item has been handled (tests, benchmarks, shutdown)."""
        await self._idle.wait()

    def _ensure_consumer(self) -> None:
        if self._task is None or self._task.done():
            # A fresh context: the request that first offered must not lend the consumer its
            # principal, request id or write buffer.
            self._task = asyncio.get_running_loop().create_task(
                self._consume(), name="memory ingest", context=contextvars.Context()
            )

    async def _consume(self) -> None:
        while True:
            item = await self._queue.get()
            try:
                await self._store(item)
            finally:
                self._queue.task_done()
                self._depth.set(self._queue.qsize())
                if self._queue.empty():
                    self._idle.set()

    async def _store(self, item: T) -> None:
        """Handle ``item``, retrying transient failures; count a drop when it cannot."""
        wait = self._retry.first_wait_s
        for attempt in range(1, self._retry.attempts + 1):
            try:
                await self._handle(item)
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if not is_transient(exc) or attempt == self._retry.attempts:
                    log.exception("the memory dropped a scored group it could not store")
                    self._drop(STORE_FAILED, f"{type(exc).__name__}: {exc}")
                    return
                self.retried += 1
                log.warning("storing a scored group failed (%s); retrying in %.1f s", exc, wait)
            await asyncio.sleep(wait)
            wait *= 2

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
