"""One worker per local model: background load, readiness, micro-batching off the event loop.

A :class:`ModelWorker` owns one model object and one thread. The model is whatever ``load``
returns (a transformers runtime, a sentence-transformers model, a reward model); ``run``
is a blocking batch function ``run(model, items) -> results`` (one result per item, in
order). Callers ``await worker.submit(items)`` from any number of concurrent requests: the
worker queues them, waits at most ``max_wait_s`` for more, merges the rows of several
requests (up to ``max_batch_rows``) into one ``run`` call on its thread and hands each
caller its own results. Items of different kinds (``kind(item)``: scoring vs generation,
different shapes) never share a call: a merged window runs one call per kind.

Lifecycle (:class:`~judges.lifecycle.Lifecycle`): ``start()`` loads the model on the
worker thread (idempotent; concurrent callers share one load), ``readiness`` says
``idle``/``loading``/``ready``/``failed`` (with the reason)/``closed``, ``aclose()`` lets
the batch in flight finish, fails the queued requests with :class:`ModelUnavailable` and
stops the thread. A request that arrives before ``start()`` starts the load and waits for
it (at most ``load_wait_s``); after a failed load requests fail at once with the reason,
until ``start()`` is called again.

Errors: if ``run`` raises on a merged call, each request of that call is rerun on its own,
so one request's bad rows fail only that request.

Example (the embedder's shape; the KARMA reward model or a simulator plug in the same way)::

    def load() -> SentenceTransformer:
        return SentenceTransformer(path, device="cpu")

    def embed(model: SentenceTransformer, texts: list[str]) -> list[np.ndarray]:
        return list(model.encode(texts, normalize_embeddings=True))

    worker = ModelWorker(load, embed, name="embedder", max_batch_rows=512, max_wait_s=0.005)
    await worker.start()                          # in the app's lifespan
    vectors = await worker.submit(["a", "b"])     # merged with concurrent callers
    print(worker.stats.batches, worker.readiness.state)
    await worker.aclose()
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Generic, TypeVar, cast

from judges.lifecycle import ModelUnavailable, Readiness, State

log = logging.getLogger(__name__)

M = TypeVar("M")
T = TypeVar("T")
R = TypeVar("R")

#: held while a model loads (see ModelWorker._load_one_at_a_time); re-entrant, so a load
#: may call code that takes it too
_LOADING = threading.RLock()


def loading_lock() -> threading.RLock:
    """The lock that model loads of this process take, for code outside a model worker that
    imports or loads transformers models in a thread of its own (KARMA training, simulator
    calibration): transformers resolves its classes lazily, and that is not thread-safe."""
    return _LOADING


@dataclass(frozen=True, slots=True)
class BatchRecord:
    """One call of the batch function: how many rows, from how many requests, how long."""

    worker: str
    kind: Hashable
    rows: int
    requests: int
    seconds: float
    ok: bool


@dataclass(slots=True)
class WorkerStats:
    """Running totals over every batch call (``merged``: calls carrying several requests)."""

    batches: int = 0
    rows: int = 0
    requests: int = 0
    merged: int = 0
    largest: int = 0

    def add(self, record: BatchRecord) -> None:
        self.batches += 1
        self.rows += record.rows
        self.requests += record.requests
        self.merged += record.requests > 1
        self.largest = max(self.largest, record.rows)


@dataclass(eq=False, slots=True)
class _Pending(Generic[T, R]):
    """One caller's items, its future and the results filled in kind by kind."""

    items: list[T]
    future: asyncio.Future[list[R]]
    results: list[R | None] = field(default_factory=list)


def _single_kind(_item: object) -> Hashable:
    return None


class ModelWorker(Generic[M, T, R]):
    """Serve ``run(model, items)`` for concurrent callers through one thread (see module doc).

    ``max_batch_rows`` caps the rows merged into one call (a single request larger than
    that still runs whole); ``max_wait_s`` is how long the first request of a call waits
    for company (0: merge only what is already queued). ``model`` starts the worker
    ready with an object already loaded. ``on_batch`` sees a :class:`BatchRecord` per
    call (metrics); ``stats`` keeps the totals.
    """

    def __init__(
        self,
        load: Callable[[], M],
        run: Callable[[M, list[T]], Sequence[R]],
        *,
        name: str,
        max_batch_rows: int = 64,
        max_wait_s: float = 0.005,
        kind: Callable[[T], Hashable] = _single_kind,
        on_batch: Callable[[BatchRecord], None] | None = None,
        load_wait_s: float | None = None,
        model: M | None = None,
    ) -> None:
        if max_batch_rows < 1 or max_wait_s < 0:
            raise ValueError("max_batch_rows must be positive and max_wait_s not negative")
        self.name = name
        self._load_fn = load
        self._run_fn = run
        self._kind = kind
        self._max_rows = max_batch_rows
        self._max_wait_s = max_wait_s
        self._load_wait_s = load_wait_s
        self.observers: list[Callable[[BatchRecord], None]] = [on_batch] if on_batch else []
        self.stats = WorkerStats()
        self._model = model
        self._state: State = "ready" if model is not None else "idle"
        self._reason: str | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"model-{name}")
        self._loading: asyncio.Task[None] | None = None
        self._queue: asyncio.Queue[_Pending[T, R]] | None = None
        self._held: _Pending[T, R] | None = None
        self._serving: asyncio.Task[None] | None = None
        self._current: asyncio.Task[None] | None = None

    # -- lifecycle -------------------------------------------------------------------

    @property
    def readiness(self) -> Readiness:
        """The worker's state, with the load error when it failed."""
        return Readiness(self._state, self._reason)

    @property
    def model(self) -> M | None:
        """The loaded model (None before the load finishes and after close)."""
        return self._model

    async def start(self) -> None:
        """Load the model on the worker thread; idempotent, retried after a failed load.

        Raises the loader's exception when the load fails (``readiness`` keeps the reason)
        and :class:`ModelUnavailable` after :meth:`aclose`.
        """
        if self._state == "closed":
            raise self._unavailable()
        if self._state == "ready":
            return
        loop = asyncio.get_running_loop()
        if self._loading is None or self._loading.done() or self._loading.get_loop() is not loop:
            self._loading = loop.create_task(self._load(), name=f"load-{self.name}")
            self._loading.add_done_callback(_retrieve)
        await asyncio.shield(self._loading)

    async def aclose(self) -> None:
        """Finish the batch in flight, fail what is queued, stop the thread, drop the model."""
        if self._state == "closed":
            return
        self._state, self._reason = "closed", None
        serving, self._serving = self._serving, None
        loop = asyncio.get_running_loop()
        if serving is not None and serving.get_loop() is loop:
            serving.cancel()
            await asyncio.gather(serving, return_exceptions=True)
        current = self._current
        if current is not None and current.get_loop() is loop:
            await asyncio.gather(current, return_exceptions=True)
        self._fail_queued()
        await asyncio.to_thread(self._executor.shutdown, wait=True)
        self._model = None

    async def _load(self) -> None:
        self._state, self._reason = "loading", None
        started = time.monotonic()
        loop = asyncio.get_running_loop()
        try:
            model = await loop.run_in_executor(self._executor, self._load_one_at_a_time)
        except Exception as exc:
            if not self._closed():
                self._state, self._reason = "failed", f"{type(exc).__name__}: {exc}"
            log.error("model %s failed to load: %s", self.name, self._reason)
            raise
        if self._closed():
            return
        self._model, self._state = model, "ready"
        log.info("model %s loaded in %.1fs", self.name, time.monotonic() - started)

    def _load_one_at_a_time(self) -> M:
        """``load_fn`` while no other worker of this process loads: transformers resolves its
        classes lazily, and two threads importing at once can fail with "cannot import name
        'AutoModelForSequenceClassification'" (seen when a KARMA model and the judge loaded
        together in a fresh process)."""
        with _LOADING:
            return self._load_fn()

    def _unavailable(self) -> ModelUnavailable:
        """The error for a request that cannot be served, naming the reason."""
        readiness = self.readiness
        if readiness.state == "failed":
            return ModelUnavailable(readiness, f"{self.name} failed to load: {readiness.reason}")
        if readiness.state == "closed":
            return ModelUnavailable(readiness, f"{self.name} was closed")
        return ModelUnavailable(readiness, f"{self.name} is {readiness.state}")

    def _closed(self) -> bool:
        return self._state == "closed"  # a method: aclose may run while a load awaits

    async def _ready_model(self) -> M:
        if self._state in ("idle", "loading"):
            try:
                await asyncio.wait_for(self.start(), self._load_wait_s)
            except TimeoutError:
                raise ModelUnavailable(self.readiness, f"{self.name} is still loading") from None
            except ModelUnavailable:
                raise
            except Exception as exc:
                raise self._unavailable() from exc
        if self._state != "ready":
            raise self._unavailable()
        return cast(M, self._model)

    # -- batching --------------------------------------------------------------------

    async def submit(self, items: Sequence[T]) -> list[R]:
        """Results for ``items`` (one each, in order), computed in calls shared with others.

        Raises :class:`ModelUnavailable` when the model is loading past ``load_wait_s``,
        failed to load or is closed, and what ``run`` raised on this request's items.
        """
        if not items:
            return []
        await self._ready_model()
        queue = self._queue_for(asyncio.get_running_loop())
        future: asyncio.Future[list[R]] = asyncio.get_running_loop().create_future()
        queue.put_nowait(_Pending(list(items), future, [None] * len(items)))
        return await future

    def _queue_for(self, loop: asyncio.AbstractEventLoop) -> asyncio.Queue[_Pending[T, R]]:
        """The queue served on this event loop (a new one after the loop changed)."""
        serving = self._serving
        if (
            self._queue is None
            or serving is None
            or serving.done()
            or serving.get_loop() is not loop
        ):
            self._queue, self._held = asyncio.Queue(), None
            self._serving = loop.create_task(self._serve(self._queue), name=f"serve-{self.name}")
        return self._queue

    async def _serve(self, queue: asyncio.Queue[_Pending[T, R]]) -> None:
        while True:
            window: list[_Pending[T, R]] = []
            try:
                await self._next_window(queue, window)
            except asyncio.CancelledError:  # closed while gathering: nothing of it ran
                for pending in window:
                    _fail(pending, self._unavailable())
                raise
            self._current = asyncio.ensure_future(self._run_window(window))
            # shielded: closing the worker stops taking work but lets this call finish
            await asyncio.shield(self._current)

    async def _next_window(
        self, queue: asyncio.Queue[_Pending[T, R]], window: list[_Pending[T, R]]
    ) -> None:
        """Fill ``window``: whatever is queued, plus arrivals within ``max_wait_s``."""
        first = self._held if self._held is not None else await queue.get()
        self._held = None
        window.append(first)
        rows = len(first.items)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._max_wait_s
        while rows < self._max_rows:
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
            if rows + len(pending.items) > self._max_rows:
                self._held = pending  # first in the next window
                break
            window.append(pending)
            rows += len(pending.items)

    async def _run_window(self, window: list[_Pending[T, R]]) -> None:
        live = [p for p in window if not p.future.done()]
        try:
            by_kind: dict[Hashable, list[tuple[_Pending[T, R], int]]] = {}
            for pending in live:
                for index, item in enumerate(pending.items):
                    by_kind.setdefault(self._kind(item), []).append((pending, index))
            for kind, slots in by_kind.items():
                await self._run_slots(kind, slots)
        except Exception as exc:  # a bug here must not leave callers waiting forever
            log.exception("model %s: batch bookkeeping failed", self.name)
            for pending in live:
                _fail(pending, exc)
            return
        for pending in live:
            if not pending.future.done():
                pending.future.set_result(cast(list[R], pending.results))

    async def _run_slots(self, kind: Hashable, slots: list[tuple[_Pending[T, R], int]]) -> None:
        """One call over these rows; on failure, each request's rows again on their own."""
        slots = [(p, i) for p, i in slots if not p.future.done()]
        owners = list(dict.fromkeys(p for p, _ in slots))
        if not owners:
            return
        try:
            results = await self._call(kind, [p.items[i] for p, i in slots], len(owners))
        except Exception as exc:
            if len(owners) == 1:
                _fail(owners[0], exc)
                return
            log.warning("model %s: a merged call failed (%s); rerun per request", self.name, exc)
            for owner in owners:
                await self._run_slots(kind, [s for s in slots if s[0] is owner])
            return
        for (pending, index), result in zip(slots, results, strict=True):
            pending.results[index] = result

    async def _call(self, kind: Hashable, items: list[T], requests: int) -> list[R]:
        model = cast(M, self._model)  # ready: close drains the call in flight before dropping it
        loop = asyncio.get_running_loop()
        started, ok = time.perf_counter(), False
        try:
            results = list(await loop.run_in_executor(self._executor, self._run_fn, model, items))
            if len(results) != len(items):
                raise RuntimeError(
                    f"{self.name}: the batch function gave {len(results)} results "
                    f"for {len(items)} rows"
                )
            ok = True
            return results
        finally:
            self._observe(
                BatchRecord(
                    self.name, kind, len(items), requests, time.perf_counter() - started, ok
                )
            )

    def _observe(self, record: BatchRecord) -> None:
        self.stats.add(record)
        for observer in self.observers:
            try:
                observer(record)
            except Exception:
                log.exception("model %s: a batch observer failed", self.name)

    def _fail_queued(self) -> None:
        closed = self._unavailable()
        if self._held is not None:
            _fail(self._held, closed)
            self._held = None
        while self._queue is not None and not self._queue.empty():
            _fail(self._queue.get_nowait(), closed)


def _fail(pending: _Pending[T, R], exc: BaseException) -> None:
    if not pending.future.done():
        pending.future.set_exception(exc)


def _retrieve(task: asyncio.Task[None]) -> None:
    """Mark a load task's exception as seen (its waiters re-raise it themselves)."""
    if not task.cancelled():
        task.exception()
