"""The micro-batcher merges concurrent callers into one call and keeps each caller's slice."""

from __future__ import annotations

import asyncio
import threading

import pytest

from services.core.batching import MicroBatcher
from services.core.metrics import Metrics


class Recorder:
    def __init__(self) -> None:
        self.calls: list[list[int]] = []
        self.threads: set[str] = set()

    def __call__(self, items: list[int]) -> list[int]:
        self.calls.append(list(items))
        self.threads.add(threading.current_thread().name)
        return [x * 10 for x in items]


async def test_concurrent_callers_share_calls_and_get_their_own_results() -> None:
    fn = Recorder()
    batcher = MicroBatcher(fn, name="t", max_items=1000, max_wait=0.05, metrics=Metrics())
    results = await asyncio.gather(*(batcher.submit([i, i + 100]) for i in range(20)))
    assert results == [[i * 10, (i + 100) * 10] for i in range(20)]
    assert len(fn.calls) < 20
    assert sum(len(c) for c in fn.calls) == 40
    assert all(name.startswith("batch-t") for name in fn.threads), "model work runs off the loop"
    await batcher.aclose()


async def test_max_items_caps_a_batch() -> None:
    fn = Recorder()
    batcher = MicroBatcher(fn, name="cap", max_items=4, max_wait=0.05)
    await asyncio.gather(*(batcher.submit([i, i]) for i in range(6)))
    assert max(len(c) for c in fn.calls) <= 4
    await batcher.aclose()


async def test_a_failing_call_fails_every_caller_in_the_batch_then_recovers() -> None:
    state = {"fail": True}

    def flaky(items: list[int]) -> list[int]:
        if state["fail"]:
            raise RuntimeError("model crashed")
        return items

    batcher = MicroBatcher(flaky, name="f", max_wait=0.02)
    outcomes = await asyncio.gather(
        batcher.submit([1]), batcher.submit([2]), return_exceptions=True
    )
    assert all(isinstance(o, RuntimeError) for o in outcomes)
    state["fail"] = False
    assert await batcher.submit([3]) == [3]
    assert await batcher.submit([]) == []
    await batcher.aclose()


@pytest.mark.parametrize("wait", [0.0, 0.01])
async def test_a_lone_caller_is_not_held_back(wait: float) -> None:
    fn = Recorder()
    batcher = MicroBatcher(fn, name="lone", max_wait=wait)
    assert await batcher.submit([5]) == [50]
    await batcher.aclose()
