"""Progress and torch threads for a job whose work runs in a thread (training, calibration).

Shared by the KARMA and simulator jobs (issue 20: the simulator imported karma's private
helpers)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

from services.core.jobs.context import JobCancelled, JobContext

log = logging.getLogger(__name__)
_T = TypeVar("_T")

#: The trainers' short stage names, as a job reports them.
STAGES = {
    "load": "loading",
    "embed characters": "embedding",
    "train": "training",
    "evaluate": "evaluating",
    "save": "saving",
}


class ThreadProgress:
    """``progress(done, total, stage)`` from the working thread, written through the job's
    context on the event loop: each new stage at once, then at most every ``every_s``. A
    cancelled job stops at the next report (a training step)."""

    def __init__(
        self, ctx: JobContext, loop: asyncio.AbstractEventLoop, every_s: float = 1.0
    ) -> None:
        self.ctx, self.loop, self.every_s = ctx, loop, every_s
        self.stage, self.last = "", 0.0

    def __call__(self, done: int, total: int, stage: str) -> None:
        self.ctx.raise_if_cancelled()
        name = STAGES.get(stage, stage)
        now = time.monotonic()
        if name == self.stage and now - self.last < self.every_s and done < total:
            return
        self.stage, self.last = name, now
        future = asyncio.run_coroutine_threadsafe(self.ctx.progress(done, total, name), self.loop)
        try:
            future.result(timeout=60)
        except JobCancelled:
            raise
        except (concurrent.futures.TimeoutError, Exception) as exc:
            log.warning("job %s: progress not recorded (%s)", self.ctx.job_id, exc)


def keeping_torch_threads(function: Callable[..., _T]) -> Callable[..., _T]:
    """``function``, restoring torch's CPU thread count after it: a job's ``threads`` sets it
    for the whole process, which also serves other models."""

    def run(*args: Any, **kwargs: Any) -> _T:
        import torch

        before = torch.get_num_threads()
        try:
            return function(*args, **kwargs)
        finally:
            torch.set_num_threads(before)

    return run
