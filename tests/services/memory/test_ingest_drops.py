"""Nothing memory ingest accepts is dropped silently (issue 23, finding 5): what the database
would refuse is a 422 before the 202; a briefly locked SQLite file is retried; a group that
still cannot be stored is counted with its reason; overflowing rewards cannot wedge a step."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from plaudit_wire.rubrics import Criterion
from services.memory import stats as st
from services.memory.ingest import IngestQueue, Retry
from tests.services.memory.conftest import ADMIN, TRAINER, Make, client, memory_of
from tests.services.memory.helpers import create_rubric

GROUP: dict[str, Any] = {
    "prompt": "Why does water boil sooner up a mountain?",
    "completions": ["Lower air pressure.", "It is colder."],
    "rewards": [1.0, 0.0],
    "verdicts": [{"c1": 0.9}, {"c1": 0.1}],
}


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"prompt": "Why\x00 does water boil?"}, "prompt"),
        ({"prompt": [{"role": "user", "content": "a\x00b"}]}, "prompt"),
        ({"completions": ["fine", "bad\x00text"]}, "completions"),
        ({"rewards": [1e308, 0.0]}, "rewards"),
        ({"rewards": [-1e308, 0.0]}, "rewards"),
        ({"verdicts": [{"c\x001": 0.5}, {"c1": 0.1}]}, "verdicts"),
    ],
)
async def test_what_the_database_would_refuse_is_a_422_before_the_202(
    memory_app: Make, change: dict[str, Any], field: str
) -> None:
    app = await memory_app()
    async with client(app, TRAINER) as trainer:
        rubric_id = await create_rubric(trainer)
        body = {"rubric_id": rubric_id, "groups": [{**GROUP, **change}], "close": True}
        answer = await trainer.post("/v1/memory/runs/r1/steps/1", json=body)
    assert answer.status_code == 422, answer.text
    assert field in json.dumps(answer.json())
    assert memory_of(app).queue.accepted == 0


async def test_a_large_but_storable_reward_is_summarised_and_the_drops_are_visible(
    memory_app: Make,
) -> None:
    app = await memory_app()
    async with client(app, TRAINER) as trainer, client(app, ADMIN) as admin:
        rubric_id = await create_rubric(trainer)
        big = {**GROUP, "rewards": [1e9, -1e9]}
        body = {"rubric_id": rubric_id, "groups": [big], "close": True}
        answer = await trainer.post("/v1/memory/runs/r1/steps/1", json=body)
        assert answer.status_code == 202, answer.text
        await memory_of(app).drained()
        [summary] = (await admin.get("/v1/memory/runs/r1/steps")).json()["items"]
        assert summary["stats"]["reward_mean"] == 0.0
        status = (await admin.get("/v1/memory/ingest")).json()
        assert (await trainer.get("/v1/memory/ingest")).status_code == 403
    assert status["accepted"] == 1 and status["dropped"] == 0, status


def test_overflowing_rewards_give_storable_statistics() -> None:
    """Rewards near the float limit overflowed the sums (inf/nan), which the database refused,
    and the step was never summarised; stored rows can still hold them."""
    criteria = [Criterion(id="c1", text="Says it", weight=1, kind="required", anchor=False)]
    groups = [
        st.GroupVerdicts(
            rewards=[1e308, 1e308, -1e308], verdicts=[{"c1": 1.0}] * 3, lengths=[1, 5, 9]
        )
    ]
    wire = st.step_stats(criteria, groups, saturation=0.9).wire()
    json.dumps(wire, allow_nan=False)  # raises on inf or nan
    assert wire["reward_mean"] == pytest.approx(1e308 / 3)


# --- the ingest queue on a real SQLite file ------------------------------------------------


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[AsyncEngine]:
    path = tmp_path / "ingest.db"
    sqlite3.connect(path).execute("CREATE TABLE t (v INTEGER)").connection.close()
    # A short busy timeout, so that a held lock fails a write at once (the default waits 5 s).
    engine = create_async_engine(f"sqlite+aiosqlite:///{path}", connect_args={"timeout": 0.05})
    yield engine
    await engine.dispose()


def _queue(engine: AsyncEngine, registry: CollectorRegistry) -> IngestQueue[int]:
    async def store(value: int) -> None:
        async with engine.begin() as conn:
            await conn.execute(text("INSERT INTO t (v) VALUES (:v)"), {"v": value})

    return IngestQueue(store, size=10, registry=registry, retry=Retry(4, first_wait_s=0.1))


def _locked(path: Path) -> sqlite3.Connection:
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    return holder


async def _rows(engine: AsyncEngine) -> list[int]:
    async with engine.connect() as conn:
        return [r[0] for r in await conn.execute(text("SELECT v FROM t ORDER BY v"))]


async def test_a_briefly_locked_sqlite_file_is_retried(engine: AsyncEngine, tmp_path: Path) -> None:
    registry = CollectorRegistry()
    queue = _queue(engine, registry)
    holder = _locked(tmp_path / "ingest.db")
    assert queue.offer(1)
    await asyncio.sleep(0.2)  # the first tries meet the lock
    holder.execute("COMMIT")
    holder.close()
    await queue.drained()
    await queue.aclose()
    assert await _rows(engine) == [1]
    assert queue.retried >= 1 and queue.dropped == 0


async def test_a_group_that_cannot_be_stored_is_counted_with_its_reason(
    engine: AsyncEngine, tmp_path: Path
) -> None:
    registry = CollectorRegistry()
    queue = _queue(engine, registry)
    holder = _locked(tmp_path / "ingest.db")
    try:
        assert queue.offer(1)
        await queue.drained()
    finally:
        holder.close()
    assert queue.offer(2)  # the lock is gone: stored
    await queue.drained()
    await queue.aclose()
    assert await _rows(engine) == [2]
    assert queue.drops == {"store_failed": 1} and queue.retried == 3
    assert queue.last_drop is not None and "database is locked" in queue.last_drop
    metrics = generate_latest(registry).decode()
    assert 'plaudit_memory_ingest_dropped_total{reason="store_failed"} 1.0' in metrics
