"""The artifact store on both set-ups: SQLite in a fresh data dir, and the real Postgres."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from services.core.db import engine as db
from services.core.store import artifacts as store_module
from services.core.store.artifacts import ArtifactStore
from services.settings import Settings


@pytest.fixture
async def store(settings: Settings) -> AsyncIterator[ArtifactStore]:
    """An ArtifactStore over ``settings`` (migrated), with its own engine."""
    url = settings.resolved_database_url
    if settings.auto_migrate:
        await db.upgrade_async(url)
    engine = db.make_engine(url)
    try:
        yield ArtifactStore(db.make_sessionmaker(engine), settings.data_dir)
    finally:
        await engine.dispose()


@pytest.fixture
def lockstep(monkeypatch: pytest.MonkeyPatch) -> Callable[[int], None]:
    """Make N writers all read the artifact before any of them writes: a forced race."""

    def arm(writers: int) -> None:
        barrier = asyncio.Barrier(writers)
        waited: set[asyncio.Task[Any] | None] = set()
        real = store_module._version_row

        async def in_lockstep(*args: Any) -> Any:
            row = await real(*args)
            task = asyncio.current_task()
            if task not in waited:  # only on the first attempt; retries go straight on
                waited.add(task)
                await barrier.wait()
            return row

        monkeypatch.setattr(store_module, "_version_row", in_lockstep)

    return arm


@pytest.fixture
def cas_rowcounts(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The row counts of the store's compare-and-set UPDATEs, in order."""
    counts: list[int] = []
    real = store_module._execute

    async def counted(*args: Any) -> Any:
        result = await real(*args)
        if result is not None:
            counts.append(result.rowcount)
        return result

    monkeypatch.setattr(store_module, "_execute", counted)
    return counts
