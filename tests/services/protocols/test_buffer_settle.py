"""The group buffers (in-process, and on the real Redis): evaluation-sized groups settle
instead of waiting out the deadline while training groups still gather whole (issue 10:
OpenRLHF sends its evaluation samples, 4 per prompt, to the URL its training uses); a caller
that goes away at any moment leaves exact groups behind; and a Redis that hangs is an outage for
the shared buffer."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Protocol

import pytest
from redis.exceptions import RedisError

from services.protocols.buffer import GroupBuffer, Settle
from services.protocols.shared_buffer import RedisGroupBuffer
from tests.conftest import REDIS_URL, require_services
from tests.serving import silent_port

#: A deadline no test reaches: a group that waits it out hangs the test (caught by GUARD_S).
NEVER_S = 600.0
GUARD_S = 60.0
EVAL = Settle(size=4, after_s=0.3)


class Scorer:
    """Records each scored group and answers ``"<item>/<group size>"``, after ``delay_s``."""

    def __init__(self, delay_s: float = 0.0) -> None:
        self.groups: list[list[str]] = []
        self.delay_s = delay_s

    async def __call__(self, key: str, items: list[str]) -> list[str]:
        self.groups.append(list(items))
        await asyncio.sleep(self.delay_s)
        return [f"{item}/{len(items)}" for item in items]


class Buffer(Protocol):
    def submit(
        self, key: str, items: list[str], *, size: int, wait_s: float, settle: Settle | None
    ) -> Awaitable[list[str]]: ...


Make = Callable[[Scorer], Buffer]


@pytest.fixture(params=["in_process", "redis"])
async def make(request: pytest.FixtureRequest) -> AsyncIterator[Make]:
    made: list[RedisGroupBuffer[str, str]] = []

    def build(scorer: Scorer) -> Buffer:
        if request.param == "in_process":
            return GroupBuffer[str, str, str](scorer)
        buffer = RedisGroupBuffer[str, str](
            REDIS_URL,
            scorer,
            group_id=lambda key: f"test-settle:{key}",
            encode=lambda r: r,
            decode=str,
            poll_s=0.02,
        )
        made.append(buffer)
        return buffer

    if request.param == "redis":
        require_services()
    yield build
    for buffer in made:
        await buffer.aclose()


def _key() -> str:
    return uuid.uuid4().hex


async def _send(buffer: Buffer, key: str, items: list[str], size: int, **kw: object) -> list[str]:
    call = buffer.submit(key, items, size=size, wait_s=kw.get("wait_s", NEVER_S), settle=EVAL)  # type: ignore[arg-type]
    return await asyncio.wait_for(call, GUARD_S)


async def test_an_evaluation_group_is_scored_once_it_settles(make: Make) -> None:
    scorer = Scorer()
    buffer = make(scorer)
    key = _key()
    answers = await asyncio.gather(*(_send(buffer, key, [f"e{i}"], 8) for i in range(4)))
    assert sorted(a[0] for a in answers) == ["e0/4", "e1/4", "e2/4", "e3/4"]
    assert len(scorer.groups) == 1


async def test_a_training_group_passing_the_evaluation_size_gathers_whole(make: Make) -> None:
    scorer = Scorer()
    buffer = make(scorer)
    key = _key()
    calls = []
    for wave in (range(4), range(4, 5), range(5, 8)):
        calls += [asyncio.ensure_future(_send(buffer, key, [f"t{i}"], 8)) for i in wave]
        await asyncio.sleep(0.2)  # under the settle time, but past it from the 4th arrival
    answers = await asyncio.gather(*calls)
    assert all(a[0].endswith("/8") for a in answers), answers
    assert len(scorer.groups) == 1


async def test_a_group_past_the_evaluation_size_waits_for_its_deadline(make: Make) -> None:
    scorer = Scorer()
    buffer = make(scorer)
    key = _key()
    answers = await asyncio.gather(
        *(_send(buffer, key, [f"t{i}"], 8, wait_s=1.5) for i in range(5))
    )
    assert all(a[0].endswith("/5") for a in answers), "scored together at the deadline"
    assert len(scorer.groups) == 1


async def test_each_evaluation_prompt_settles_on_its_own(make: Make) -> None:
    scorer = Scorer()
    buffer = make(scorer)
    keys = [_key() for _ in range(3)]
    calls = [_send(buffer, k, [f"{n}-{i}"], 8) for n, k in enumerate(keys) for i in range(4)]
    answers = await asyncio.gather(*calls)
    assert all(a[0].endswith("/4") for a in answers)
    assert sorted(len(g) for g in scorer.groups) == [4, 4, 4]


async def test_a_training_group_pausing_at_the_evaluation_size_is_scored_in_two_parts(
    make: Make,
) -> None:
    """The documented cost of settling: visible in each sample's group size."""
    scorer = Scorer()
    buffer = make(scorer)
    key = _key()
    first = await asyncio.gather(*(_send(buffer, key, [f"t{i}"], 8) for i in range(4)))
    rest = await asyncio.gather(*(_send(buffer, key, [f"t{i}"], 8) for i in range(4, 8)))
    assert all(a[0].endswith("/4") for a in [*first, *rest])
    assert [len(g) for g in scorer.groups] == [4, 4]


@pytest.mark.parametrize("ticks", [1, 2, 3, 5, 8, 13])
async def test_a_caller_cancelled_while_joining_leaves_no_item_behind(
    make: Make, ticks: int
) -> None:
    """Cancelled a few event-loop turns after it started (on Redis: while its items are being
    added), the caller must not count in the group the next two samples fill."""
    scorer = Scorer()
    buffer = make(scorer)
    key = _key()
    gone = asyncio.ensure_future(_send(buffer, key, ["gone"], 2))
    for _ in range(ticks):
        await asyncio.sleep(0)
    gone.cancel()
    await asyncio.gather(gone, return_exceptions=True)
    answers = await asyncio.gather(*(_send(buffer, key, [s], 2, wait_s=3.0) for s in "ab"))
    assert answers == [["a/2"], ["b/2"]], scorer.groups
    assert scorer.groups == [["a", "b"]]


async def test_the_caller_that_fills_a_group_may_go_while_it_is_scored(make: Make) -> None:
    """Its going must not stop the scoring the rest of the group waits for."""
    scorer = Scorer(delay_s=0.3)
    buffer = make(scorer)
    key = _key()
    waiting = asyncio.ensure_future(_send(buffer, key, ["stays"], 2))
    await asyncio.sleep(0.1)
    filling = asyncio.ensure_future(_send(buffer, key, ["goes"], 2))
    while not scorer.groups:
        await asyncio.sleep(0.01)
    filling.cancel()
    assert await waiting == ["stays/2"]
    assert scorer.groups == [["stays", "goes"]]


async def test_a_redis_that_stops_answering_is_an_outage_not_a_hang() -> None:
    with silent_port() as port:
        buffer = RedisGroupBuffer[str, str](
            f"redis://127.0.0.1:{port}/0",
            Scorer(),
            group_id=str,
            encode=lambda r: r,
            decode=str,
            timeout_s=0.3,
        )
        try:
            with pytest.raises(RedisError):  # the API answers it as a 503 with Retry-After
                await asyncio.wait_for(buffer.submit("k", ["a"], size=2, wait_s=5), GUARD_S)
        finally:
            await buffer.aclose()
