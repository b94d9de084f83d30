"""Alembic migrations upgrade and downgrade on SQLite and on the real Postgres."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect

from services.core import db
from services.core.models import Base
from tests.conftest import PG_MIGRATIONS_URL, require_services


async def _tables(url: str) -> set[str]:
    engine = db.make_engine(url)
    try:
        async with engine.connect() as conn:
            names = await conn.run_sync(lambda c: set(inspect(c).get_table_names()))
    finally:
        await engine.dispose()
    return names - {"alembic_version"}


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_upgrade_then_downgrade(backend: str, tmp_path: Path) -> None:
    if backend == "postgres":
        require_services()
        url = PG_MIGRATIONS_URL
        await asyncio.to_thread(db.downgrade, url, "base")
    else:
        url = f"sqlite+aiosqlite:///{tmp_path / 'sub' / 'm.db'}"
    await asyncio.to_thread(db.upgrade, url, "head")
    assert await _tables(url) == set(Base.metadata.tables)
    await asyncio.to_thread(db.downgrade, url, "base")
    assert await _tables(url) == set()
    await asyncio.to_thread(db.upgrade, url, "head")
    assert await _tables(url) == set(Base.metadata.tables)


async def _schema_diff(url: str) -> list[Any]:
    """What autogenerate would still write after the migrations: empty when they match."""
    engine = db.make_engine(url)

    def compare(connection: Any) -> list[Any]:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        return list(compare_metadata(context, Base.metadata))

    try:
        async with engine.connect() as conn:
            return await conn.run_sync(compare)
    finally:
        await engine.dispose()


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_orm_tables_match_the_migrations(backend: str, tmp_path: Path) -> None:
    if backend == "postgres":
        require_services()
        url = PG_MIGRATIONS_URL
        await asyncio.to_thread(db.downgrade, url, "base")
    else:
        url = f"sqlite+aiosqlite:///{tmp_path / 'orm.db'}"
    await asyncio.to_thread(db.upgrade, url, "head")
    assert await _schema_diff(url) == []
