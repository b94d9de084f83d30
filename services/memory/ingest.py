"""The bounded hand-off from scoring to the memory: never blocks, never fails a request.

``offer`` puts a group on an in-process queue (``put_nowait``); when the queue is full the
group is dropped and counted (``plaudit_memory_ingest_dropped_total``). One consumer task
takes groups off the queue and records them, in its own context (no request's principal or
write buffer leaks into it).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge

log = logging.getLogger(__name__)
T = TypeVar("T")


class IngestQueue(Generic[T]):
    """``offer(item) -> bool`` (False: dropped); ``handle`` runs on each item in order."""

    def __init__(
        self,
        handle: Callable[[T], Awaitable[None]],
        *,
        size: int,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self._handle = handle
        self._queue: asyncio.Queue[T] = asyncio.Queue(maxsize=size)
        self._task: asyncio.Task[None] | None = None
        self._idle = asyncio.Event()
        self._idle.set()
        self.dropped = 0
        self.accepted = 0
        self.failed = 0
        self._dropped = Counter(
            "plaudit_memory_ingest_dropped",
            "Scored groups the evaluation memory dropped because its ingest queue was full",
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
            self.dropped += 1
            self._dropped.inc()
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
                await self._handle(item)
            except asyncio.CancelledError:
                raise
            except Exception:
                self.failed += 1
                log.exception("the memory could not record a scored group")
            finally:
                self._queue.task_done()
                self._depth.set(self._queue.qsize())
                if self._queue.empty():
                    self._idle.set()

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
