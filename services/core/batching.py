"""A micro-batcher: concurrent requests are gathered into one model call off the event loop.

Each caller submits a list of items (for example the texts of one group); the batcher waits at
most ``max_wait`` seconds for more callers, up to ``max_items`` items, runs ``fn`` once over the
concatenation in a dedicated worker thread and hands each caller its slice of the results.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Generic, TypeVar

from services.core.metrics import Metrics

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")


@dataclass
class _Pending(Generic[T, R]):
    items: Sequence[T]
    future: asyncio.Future[list[R]]


class MicroBatcher(Generic[T, R]):
    """Batch ``fn(items) -> results`` (same length) across concurrent callers."""

    def __init__(
        self,
        fn: Callable[[list[T]], Sequence[R]],
        *,
        name: str,
        max_items: int = 512,
        max_wait: float = 0.005,
        metrics: Metrics | None = None,
    ) -> None:
        self._fn = fn
        self.name = name
        self._max_items = max_items
        self._max_wait = max_wait
        self._metrics = metrics
        self._queue: asyncio.Queue[_Pending[T, R]] | None = None
        self._worker: asyncio.Task[None] | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"batch-{name}")

    async def submit(self, items: Sequence[T]) -> list[R]:
        """Results for ``items``, computed in a shared batch."""
        if not items:
            return []
        if self._queue is None or self._worker is None or self._worker.done():
            self._queue = asyncio.Queue()
            self._worker = asyncio.create_task(self._loop(self._queue))
        future: asyncio.Future[list[R]] = asyncio.get_running_loop().create_future()
        await self._queue.put(_Pending(items, future))
        return await future

    async def _loop(self, queue: asyncio.Queue[_Pending[T, R]]) -> None:
        while True:
            batch = await self._gather(queue)
            await self._run(batch)

    async def _gather(self, queue: asyncio.Queue[_Pending[T, R]]) -> list[_Pending[T, R]]:
        batch = [await queue.get()]
        size = len(batch[0].items)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._max_wait
        while size < self._max_items:
            try:
                if queue.empty():
                    remaining = deadline - loop.time()
                    if remaining <= 0:
                        break
                    pending = await asyncio.wait_for(queue.get(), remaining)
                else:
                    pending = queue.get_nowait()
            except TimeoutError:
                break
            batch.append(pending)
            size += len(pending.items)
        return batch

    async def _run(self, batch: list[_Pending[T, R]]) -> None:
        live = [p for p in batch if not p.future.done()]
        if not live:
            return
        flat: list[T] = [item for p in live for item in p.items]
        if self._metrics is not None:
            self._metrics.model_batch_size.labels(self.name).observe(len(flat))
            self._metrics.model_batch_requests.labels(self.name).observe(len(live))
        loop = asyncio.get_running_loop()
        try:
            results = await loop.run_in_executor(self._executor, self._fn, flat)
        except Exception as exc:
            log.exception("batched call %s failed", self.name)
            for p in live:
                if not p.future.done():
                    p.future.set_exception(exc)
            return
        start = 0
        for p in live:
            end = start + len(p.items)
            if not p.future.done():
                p.future.set_result(list(results[start:end]))
            start = end

    async def aclose(self) -> None:
        """Stop the worker task and the thread."""
        if self._worker is not None:
            self._worker.cancel()
            await asyncio.gather(self._worker, return_exceptions=True)
        self._executor.shutdown(wait=False, cancel_futures=True)
