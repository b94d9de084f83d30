"""The model worker's own contract, on plain functions as the "model".

These prove the bookkeeping (merging, kinds, failure isolation, lifecycle); the real-model
tests (MiniLM in tests/services/core/models/test_embedder_worker.py, SmolLM2 in
tests/judges/test_local_merging.py) prove the same on real forward passes.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from judges.lifecycle import ModelUnavailable
from judges.model_worker import BatchRecord, ModelWorker


class Times10:
    """A "model" that multiplies by ten and records every call and its thread."""

    def __init__(self, delay_s: float = 0.0) -> None:
        self.calls: list[list[int]] = []
        self.threads: set[str] = set()
        self.delay_s = delay_s

    def __call__(self, _model: object, items: list[int]) -> list[int]:
        self.calls.append(list(items))
        self.threads.add(threading.current_thread().name)
        time.sleep(self.delay_s)
        if any(x < 0 for x in items):
            raise ValueError("negative input")
        return [x * 10 for x in items]


def worker(run: Times10, **kwargs: object) -> ModelWorker[object, int, int]:
    options: dict[str, object] = {"name": "t", "max_wait_s": 0.05, **kwargs}
    return ModelWorker(lambda: object(), run, **options)  # type: ignore[arg-type]


async def test_concurrent_callers_share_calls_and_get_their_own_results() -> None:
    run, seen = Times10(), []
    w = worker(run, max_batch_rows=1000, on_batch=seen.append)
    await w.start()
    results = await asyncio.gather(*(w.submit([i, i + 100]) for i in range(20)))
    assert results == [[i * 10, (i + 100) * 10] for i in range(20)]
    assert len(run.calls) == w.stats.batches < 20
    assert w.stats.rows == 40 and w.stats.requests == 20 and w.stats.merged >= 1
    assert all(isinstance(r, BatchRecord) and r.ok for r in seen)
    assert all(name.startswith("model-t") for name in run.threads), "work runs off the loop"
    await w.aclose()


async def test_max_batch_rows_caps_a_call_but_never_splits_a_request() -> None:
    run = Times10()
    w = worker(run, max_batch_rows=4)
    results = await asyncio.gather(*(w.submit([i, i]) for i in range(6)), w.submit([7] * 6))
    assert results[-1] == [70] * 6
    assert sorted(len(c) for c in run.calls) == [4, 4, 4, 6]
    await w.aclose()


async def test_kinds_never_share_a_call() -> None:
    run = Times10()
    w = ModelWorker(lambda: None, run, name="k", max_wait_s=0.05, kind=lambda x: x % 2)
    results = await asyncio.gather(w.submit([1, 2, 3]), w.submit([4, 5]))
    assert results == [[10, 20, 30], [40, 50]]
    assert sorted(map(sorted, run.calls)) == [[1, 3, 5], [2, 4]]
    await w.aclose()


async def test_a_failing_request_does_not_fail_the_others_it_was_merged_with() -> None:
    run = Times10()
    w = worker(run)
    good, bad, other = await asyncio.gather(
        w.submit([1, 2]), w.submit([3, -1]), w.submit([4]), return_exceptions=True
    )
    assert good == [10, 20] and other == [40]
    assert isinstance(bad, ValueError)
    assert run.calls[0] == [1, 2, 3, -1, 4], "merged first, then rerun per request"
    assert await w.submit([5]) == [50], "recovers"
    assert await w.submit([]) == []
    await w.aclose()


@pytest.mark.parametrize("wait", [0.0, 0.01])
async def test_a_lone_caller_is_not_held_back(wait: float) -> None:
    w = worker(Times10(), max_wait_s=wait)
    assert await w.submit([5]) == [50]
    await w.aclose()


async def test_one_shared_load_on_the_worker_thread_then_ready() -> None:
    loads: list[str] = []

    def load() -> str:
        loads.append(threading.current_thread().name)
        time.sleep(0.05)
        return "model"

    w: ModelWorker[str, int, int] = ModelWorker(load, Times10(), name="l")
    assert w.readiness.state == "idle" and not w.readiness.ready
    await asyncio.gather(w.start(), w.start(), w.submit([1]))
    assert len(loads) == 1 and loads[0].startswith("model-l")
    assert w.readiness.ready and w.model == "model"
    await w.aclose()


async def test_a_failed_load_is_reported_with_its_reason_and_can_be_retried() -> None:
    attempts: list[int] = []

    def load() -> str:
        attempts.append(1)
        if len(attempts) == 1:
            raise FileNotFoundError("no weights at /models/x")
        return "model"

    w: ModelWorker[str, int, int] = ModelWorker(load, Times10(), name="f")
    with pytest.raises(FileNotFoundError):
        await w.start()
    assert w.readiness.state == "failed"
    assert w.readiness.reason == "FileNotFoundError: no weights at /models/x"
    with pytest.raises(ModelUnavailable, match="f failed to load: FileNotFoundError"):
        await w.submit([1])
    assert len(attempts) == 1, "requests do not retry a failed load"
    await w.start()
    assert w.readiness.ready and await w.submit([1]) == [10]
    await w.aclose()


async def test_a_request_does_not_wait_past_load_wait() -> None:
    w: ModelWorker[str, int, int] = ModelWorker(
        lambda: time.sleep(0.5) or "m", Times10(), name="slow", load_wait_s=0.01
    )
    with pytest.raises(ModelUnavailable, match="still loading") as info:
        await w.submit([1])
    assert info.value.readiness.state == "loading"
    await w.start()
    assert await w.submit([1]) == [10]
    await w.aclose()


async def test_close_finishes_the_call_in_flight_and_fails_the_queue() -> None:
    run = Times10(delay_s=0.2)
    w = worker(run, max_batch_rows=1, max_wait_s=0.0)
    await w.start()
    first = asyncio.create_task(w.submit([1]))
    await asyncio.sleep(0.05)  # the first call is running on the thread
    queued = asyncio.create_task(w.submit([2]))
    await asyncio.sleep(0)
    await w.aclose()
    assert await first == [10]
    with pytest.raises(ModelUnavailable, match="was closed"):
        await queued
    assert w.readiness.state == "closed" and w.model is None
    assert not [t for t in threading.enumerate() if t.name.startswith("model-t")]
    with pytest.raises(ModelUnavailable):
        await w.submit([3])
    with pytest.raises(ModelUnavailable):
        await w.start()
    await w.aclose()  # idempotent
