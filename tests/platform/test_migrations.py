"""Alembic migrations upgrade and downgrade on SQLite and on the real Postgres."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect, text

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


_SPEC_ROWS = {  # stored name -> owner, as 0009 left them
    "shared-spec": None,
    "tenant-spec": "key_00000000000000aa",
    "rubric-art": "key_00000000000000aa",
}


async def _artifact_names(url: str) -> dict[str, set[str]]:
    engine = db.make_engine(url)
    try:
        async with engine.connect() as conn:
            found: dict[str, set[str]] = {}
            for table in ("artifacts", "artifact_versions", "artifact_events"):
                rows = await conn.execute(text(f"SELECT name FROM {table}"))
                found[table] = {name for (name,) in rows}
            return found
    finally:
        await engine.dispose()


async def _insert_artifacts(url: str) -> None:
    engine = db.make_engine(url)
    now = datetime.now(UTC)
    try:
        async with engine.begin() as conn:
            for name, owner in _SPEC_ROWS.items():
                kind = "rubric" if name == "rubric-art" else "reward_spec"
                row = {"n": name, "k": kind, "o": owner, "t": now}
                await conn.execute(
                    text("INSERT INTO artifacts VALUES (:n, :k, 1, 1, :o, :t, :t)"),
                    row,
                )
                await conn.execute(
                    text(
                        "INSERT INTO artifact_versions (name, version, kind, content, "
                        "content_hash, owner, metadata, created_at) "
                        "VALUES (:n, 1, :k, '{}', 'h', :o, '{}', :t)"
                    ),
                    row,
                )
                await conn.execute(
                    text(
                        "INSERT INTO artifact_events (name, action, to_version, owner, "
                        "created_at) VALUES (:n, 'create', 1, :o, :t)"
                    ),
                    row,
                )
    finally:
        await engine.dispose()


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_tenant_specs_move_into_their_owners_namespace(backend: str, tmp_path: Path) -> None:
    """0010 (issue 23): a keyed tenant's reward spec becomes ``<owner>~<name>``; down undoes it."""
    if backend == "postgres":
        require_services()
        url = PG_MIGRATIONS_URL
        await asyncio.to_thread(db.downgrade, url, "base")
    else:
        url = f"sqlite+aiosqlite:///{tmp_path / 'owners.db'}"
    await asyncio.to_thread(db.upgrade, url, "0009")
    await _insert_artifacts(url)
    before = {"shared-spec", "tenant-spec", "rubric-art"}
    await asyncio.to_thread(db.upgrade, url, "0010")
    moved = {"shared-spec", "key_00000000000000aa~tenant-spec", "rubric-art"}
    assert all(names == moved for names in (await _artifact_names(url)).values())
    await asyncio.to_thread(db.downgrade, url, "0009")
    assert all(names == before for names in (await _artifact_names(url)).values())
    await asyncio.to_thread(db.downgrade, url, "base")
