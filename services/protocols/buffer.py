"""Gather a rollout group that arrives one sample per request, then score it once.

OpenRLHF and slime post each rollout on its own (concurrently for one prompt's group), while
group channels (judge_pairwise, diversity) must see the whole group at once (issue 4). A
:class:`GroupBuffer` holds the items submitted under one key until ``size`` of them are there
or ``wait_s`` has passed since the first arrived, scores them together in one call, and hands
each caller the results of its own items, by position (so identical items stay distinct).

Evaluation groups are smaller than training groups and come through the same URL (OpenRLHF
sends ``--eval.n_samples_per_prompt`` samples to ``--reward.remote_url``), so they would wait out
``wait_s``. With a :class:`Settle` rule a group that holds exactly the evaluation size and gets
no new item for ``after_s`` is scored at once (issue 10).

State lives in this process only; :mod:`services.protocols.shared_buffer` is the same buffer on
Redis, for replicas behind a load balancer.

Concurrency: everything runs on one event loop, and no method awaits between reading and
changing the open batches, so no lock is needed; scoring runs in its own task, so a caller
that goes away (a cancelled request) never cancels the scoring the others wait for.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

log = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)
S = TypeVar("S")
R = TypeVar("R")


@dataclass(frozen=True)
class Settle:
    """Score a group early when it holds exactly ``size`` items and ``after_s`` passed with none
    added: the trainer's evaluation group size, shorter than the training one.

    A training group that pauses at exactly ``size`` items for ``after_s`` is scored in two
    parts (each visible by its group size); a longer ``after_s`` makes that rarer.
    """

    size: int
    after_s: float


@dataclass(eq=False)
class _Waiter(Generic[S, R]):
    items: list[S]
    future: asyncio.Future[list[R]]


@dataclass(eq=False)
class _Batch(Generic[S, R]):
    size: int
    settle: Settle | None = None
    waiters: list[_Waiter[S, R]] = field(default_factory=list)
    timer: asyncio.TimerHandle | None = None
    settle_timer: asyncio.TimerHandle | None = None

    @property
    def count(self) -> int:
        return sum(len(w.items) for w in self.waiters)


class GroupBuffer(Generic[K, S, R]):
    """Batches items by key; ``score(key, items)`` must return one result per item, in order.

    Example::

        async def score(prompt: str, responses: list[str]) -> list[float]:
            return [float(len(r)) for r in responses]

        buffer = GroupBuffer(score)
        # Eight concurrent requests, one sample each: one score() call with all eight.
        [reward] = await buffer.submit("2+2?", ["4"], size=8, wait_s=30.0)
    """

    def __init__(self, score: Callable[[K, list[S]], Awaitable[list[R]]]) -> None:
        self._score = score
        self._open: dict[K, _Batch[S, R]] = {}
        self._running: set[asyncio.Task[None]] = set()

    async def submit(
        self,
        key: K,
        items: Sequence[S],
        *,
        size: int,
        wait_s: float,
        settle: Settle | None = None,
    ) -> list[R]:
        """Wait for the group of ``key`` to fill (or time out, or settle); the results of
        ``items``.

        A call may carry several items of the group; they all count towards ``size``. The
        first call of a batch sets its size, deadline and settle rule.
        """
        if not items:
            return []
        loop = asyncio.get_running_loop()
        waiter: _Waiter[S, R] = _Waiter(list(items), loop.create_future())
        batch = self._open.get(key)
        if batch is None:
            batch = _Batch(size=size, settle=settle)
            batch.timer = loop.call_later(wait_s, self._flush, key, batch)
            self._open[key] = batch
        batch.waiters.append(waiter)
        if batch.count >= batch.size:
            self._flush(key, batch)
        else:
            self._arm_settle(key, batch)
        try:
            return await waiter.future
        except asyncio.CancelledError:
            self._withdraw(key, batch, waiter)
            raise

    def waiting(self, key: K) -> int:
        """How many items of ``key`` wait for their group to fill."""
        batch = self._open.get(key)
        return 0 if batch is None else batch.count

    async def aclose(self) -> None:
        """Cancel every waiting caller and every scoring in progress (at shutdown)."""
        for batch in list(self._open.values()):
            for timer in (batch.timer, batch.settle_timer):
                if timer is not None:
                    timer.cancel()
            for waiter in batch.waiters:
                waiter.future.cancel()
        self._open.clear()
        for task in list(self._running):
            task.cancel()
        await asyncio.gather(*self._running, return_exceptions=True)

    def _arm_settle(self, key: K, batch: _Batch[S, R]) -> None:
        """(Re)start the settle countdown after an arrival, when the group is at the settle
        size; any other count stops it."""
        if batch.settle_timer is not None:
            batch.settle_timer.cancel()
            batch.settle_timer = None
        rule = batch.settle
        if rule is not None and batch.count == rule.size:
            loop = asyncio.get_running_loop()
            batch.settle_timer = loop.call_later(rule.after_s, self._settled, key, batch)

    def _settled(self, key: K, batch: _Batch[S, R]) -> None:
        log.info("a group settled at %d of %d items: scoring it now", batch.count, batch.size)
        self._flush(key, batch)

    def _withdraw(self, key: K, batch: _Batch[S, R], waiter: _Waiter[S, R]) -> None:
        """A caller went away before its group was scored: its items leave the group."""
        if self._open.get(key) is not batch:
            return  # already being scored; the result is simply dropped
        batch.waiters.remove(waiter)
        if not batch.waiters:
            for timer in (batch.timer, batch.settle_timer):
                if timer is not None:
                    timer.cancel()
            del self._open[key]
        else:
            self._arm_settle(key, batch)

    def _flush(self, key: K, batch: _Batch[S, R]) -> None:
        if self._open.get(key) is not batch:
            return
        del self._open[key]
        for timer in (batch.timer, batch.settle_timer):
            if timer is not None:
                timer.cancel()
        if batch.count < batch.size:
            log.debug("scoring a partial group: %d of %d items", batch.count, batch.size)
        task = asyncio.get_running_loop().create_task(self._run(key, batch))
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    async def _run(self, key: K, batch: _Batch[S, R]) -> None:
        items = [item for waiter in batch.waiters for item in waiter.items]
        try:
            results = await self._score(key, items)
            if len(results) != len(items):
                raise RuntimeError(f"the scorer gave {len(results)} results for {len(items)}")
        except asyncio.CancelledError:
            for waiter in batch.waiters:
                waiter.future.cancel()
            raise
        except Exception as exc:
            for waiter in batch.waiters:
                if not waiter.future.done():
                    waiter.future.set_exception(exc)
            return
        start = 0
        for waiter in batch.waiters:
            end = start + len(waiter.items)
            if not waiter.future.done():
                waiter.future.set_result(results[start:end])
            start = end
