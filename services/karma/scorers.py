"""The loaded KARMA models of a process: one micro-batching model worker per stored version.

Each version's files sit in the artifact store; its worker loads them on the first request
(in the worker's thread) and merges the rows of concurrent requests into shared forward
passes (:class:`judges.model_worker.ModelWorker`). At most ``keep`` versions stay loaded; the
least recently used one beyond that is closed::

    pool = ScorerPool(settings, on_batch=metrics.observe_batch)
    worker = pool.worker("karma@3", path)
    scores = await worker.submit([KarmaInput("How do I pick a major?", "Take intro classes.")])
"""

from __future__ import annotations

import asyncio
import functools
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

from judges.model_worker import BatchRecord, ModelWorker
from services.karma.features import KarmaInput
from services.karma.model import ScoringModel, load_model
from services.karma.settings import KarmaSettings

KarmaWorker = ModelWorker[ScoringModel, KarmaInput, float]


def score_rows(model: ScoringModel, rows: list[KarmaInput]) -> list[float]:
    """The batch function: one score per row (metadata as given; served inputs have no order
    to hide, unlike the pair evaluation)."""
    return model.score_inputs(rows, order_blind=False)


class ScorerPool:
    """Model workers by artifact reference (``name@N``), least recently used closed first."""

    def __init__(
        self, settings: KarmaSettings, *, on_batch: Callable[[BatchRecord], None] | None = None
    ) -> None:
        self._settings = settings
        self._on_batch = on_batch
        self._workers: OrderedDict[str, KarmaWorker] = OrderedDict()
        self._closing: set[asyncio.Task[None]] = set()

    def worker(self, ref: str, path: Path) -> KarmaWorker:
        """The worker of version ``ref`` (files in ``path``), created on first use."""
        found = self._workers.get(ref)
        if found is not None:
            self._workers.move_to_end(ref)
            return found
        settings = self._settings
        load = functools.partial(
            load_model, path, device=settings.device, batch_size=settings.batch_size
        )
        worker: KarmaWorker = ModelWorker(
            load,
            score_rows,
            name="karma",
            max_batch_rows=settings.max_batch_rows,
            max_wait_s=settings.max_wait_ms / 1000,
            load_wait_s=settings.load_wait_s,
            on_batch=self._on_batch,
        )
        self._workers[ref] = worker
        while len(self._workers) > settings.loaded_models:
            _, oldest = self._workers.popitem(last=False)
            task = asyncio.get_running_loop().create_task(oldest.aclose())
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)
        return worker

    def loaded(self) -> list[str]:
        """The references with a worker, least recently used first."""
        return list(self._workers)

    async def aclose(self) -> None:
        workers, self._workers = list(self._workers.values()), OrderedDict()
        for worker in workers:
            await worker.aclose()
        await asyncio.gather(*self._closing, return_exceptions=True)
