"""GroupBuffer: groups fill, time out, keep duplicates apart and survive cancelled callers."""

from __future__ import annotations

import asyncio

import pytest

from services.core.errors import BackendUnavailable
from services.protocols.buffer import GroupBuffer


class Recorder:
    """A scorer that remembers each call and answers ``"<item>#<position in group>"``."""

    def __init__(self, delay: float = 0.0, fail: BaseException | None = None) -> None:
        self.calls: list[tuple[str, list[str]]] = []
        self.delay = delay
        self.fail = fail

    async def __call__(self, key: str, items: list[str]) -> list[str]:
        self.calls.append((key, list(items)))
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.fail is not None:
            raise self.fail
        return [f"{item}#{i}" for i, item in enumerate(items)]


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_a_full_group_is_scored_once_and_each_caller_gets_its_own() -> None:
    scorer = Recorder()
    buffer: GroupBuffer[str, str, str] = GroupBuffer(scorer)
    results = await asyncio.gather(
        *(buffer.submit("p", [f"s{i}"], size=4, wait_s=30) for i in range(4))
    )
    assert results == [["s0#0"], ["s1#1"], ["s2#2"], ["s3#3"]]
    assert scorer.calls == [("p", ["s0", "s1", "s2", "s3"])]
    assert buffer.waiting("p") == 0


async def test_the_deadline_scores_a_partial_group() -> None:
    scorer = Recorder()
    buffer: GroupBuffer[str, str, str] = GroupBuffer(scorer)
    loop = asyncio.get_running_loop()
    started = loop.time()
    results = await asyncio.gather(
        buffer.submit("p", ["a"], size=4, wait_s=0.2), buffer.submit("p", ["b"], size=4, wait_s=9)
    )
    assert list(results) == [["a#0"], ["b#1"]]
    assert scorer.calls == [("p", ["a", "b"])]
    assert 0.15 <= loop.time() - started < 5, "the first arrival's deadline applies"


async def test_identical_items_stay_distinct_by_position() -> None:
    scorer = Recorder()
    buffer: GroupBuffer[str, str, str] = GroupBuffer(scorer)
    results = await asyncio.gather(
        *(buffer.submit("p", ["same"], size=3, wait_s=30) for _ in range(3))
    )
    assert results == [["same#0"], ["same#1"], ["same#2"]]
    assert scorer.calls == [("p", ["same", "same", "same"])]


async def test_a_call_with_several_items_counts_them_all() -> None:
    scorer = Recorder()
    buffer: GroupBuffer[str, str, str] = GroupBuffer(scorer)
    first = asyncio.ensure_future(buffer.submit("p", ["a", "b", "c"], size=4, wait_s=30))
    await _settle()
    assert buffer.waiting("p") == 3 and not first.done()
    assert await buffer.submit("p", ["d"], size=4, wait_s=30) == ["d#3"]
    assert await first == ["a#0", "b#1", "c#2"]
    assert len(scorer.calls) == 1


async def test_keys_are_separate_groups() -> None:
    scorer = Recorder()
    buffer: GroupBuffer[str, str, str] = GroupBuffer(scorer)
    results = await asyncio.gather(
        buffer.submit("p", ["a"], size=2, wait_s=30),
        buffer.submit("q", ["x"], size=2, wait_s=30),
        buffer.submit("q", ["y"], size=2, wait_s=30),
        buffer.submit("p", ["b"], size=2, wait_s=30),
    )
    assert list(results) == [["a#0"], ["x#0"], ["y#1"], ["b#1"]]
    assert sorted(scorer.calls) == [("p", ["a", "b"]), ("q", ["x", "y"])]


async def test_a_cancelled_caller_leaves_the_group() -> None:
    scorer = Recorder()
    buffer: GroupBuffer[str, str, str] = GroupBuffer(scorer)
    gone = asyncio.ensure_future(buffer.submit("p", ["gone"], size=3, wait_s=30))
    stays = asyncio.ensure_future(buffer.submit("p", ["stays"], size=3, wait_s=30))
    await _settle()
    gone.cancel()
    await _settle()
    assert gone.cancelled() and buffer.waiting("p") == 1
    late = await asyncio.gather(
        buffer.submit("p", ["c"], size=3, wait_s=30), buffer.submit("p", ["d"], size=3, wait_s=30)
    )
    assert await stays == ["stays#0"] and list(late) == [["c#1"], ["d#2"]]
    assert scorer.calls == [("p", ["stays", "c", "d"])]


async def test_when_every_caller_leaves_nothing_is_scored() -> None:
    scorer = Recorder()
    buffer: GroupBuffer[str, str, str] = GroupBuffer(scorer)
    task = asyncio.ensure_future(buffer.submit("p", ["a"], size=2, wait_s=0.05))
    await _settle()
    task.cancel()
    await asyncio.sleep(0.15)
    assert scorer.calls == [] and buffer.waiting("p") == 0


async def test_a_caller_cancelled_during_scoring_does_not_stop_the_others() -> None:
    scorer = Recorder(delay=0.1)
    buffer: GroupBuffer[str, str, str] = GroupBuffer(scorer)
    first = asyncio.ensure_future(buffer.submit("p", ["a"], size=2, wait_s=30))
    second = asyncio.ensure_future(buffer.submit("p", ["b"], size=2, wait_s=30))
    await asyncio.sleep(0.02)
    assert len(scorer.calls) == 1, "the group is being scored"
    first.cancel()
    assert await second == ["b#1"]
    assert first.cancelled()


async def test_a_scorer_error_reaches_every_caller() -> None:
    scorer = Recorder(fail=BackendUnavailable("judge down"))
    buffer: GroupBuffer[str, str, str] = GroupBuffer(scorer)
    results = await asyncio.gather(
        buffer.submit("p", ["a"], size=2, wait_s=30),
        buffer.submit("p", ["b"], size=2, wait_s=30),
        return_exceptions=True,
    )
    assert all(isinstance(r, BackendUnavailable) for r in results)


async def test_a_scorer_with_the_wrong_count_is_an_error() -> None:
    async def short(key: str, items: list[str]) -> list[str]:
        return items[:1]

    buffer: GroupBuffer[str, str, str] = GroupBuffer(short)
    with pytest.raises(RuntimeError, match="1 results for 2"):
        await buffer.submit("p", ["a", "b"], size=2, wait_s=30)


async def test_aclose_releases_waiting_callers() -> None:
    buffer: GroupBuffer[str, str, str] = GroupBuffer(Recorder())
    task = asyncio.ensure_future(buffer.submit("p", ["a"], size=2, wait_s=30))
    await _settle()
    await buffer.aclose()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert buffer.waiting("p") == 0


async def test_many_concurrent_callers_form_exact_groups() -> None:
    scorer = Recorder()
    buffer: GroupBuffer[str, str, str] = GroupBuffer(scorer)
    results = await asyncio.gather(
        *(buffer.submit("p", [str(i)], size=8, wait_s=30) for i in range(32))
    )
    assert [len(call[1]) for call in scorer.calls] == [8, 8, 8, 8]
    assert sorted(r[0].split("#")[0] for r in results) == sorted(str(i) for i in range(32))


async def test_an_empty_submission_returns_at_once() -> None:
    buffer: GroupBuffer[str, str, str] = GroupBuffer(Recorder())
    assert await buffer.submit("p", [], size=2, wait_s=30) == []
