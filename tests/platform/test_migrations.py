"""Alembic migrations upgrade and downgrade on SQLite and on the real Postgres."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect, text
from sqlalchemy.engine import make_url

from services.core import db
from services.core.models import Base
from tests.conftest import PG_MIGRATIONS_URL, require_services

ROOT = Path(__file__).resolve().parents[2]


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


async def _fresh_database(url: str) -> None:
    parsed = make_url(url)
    admin = await asyncpg.connect(
        host=parsed.host, port=parsed.port or 5432, user=parsed.username, database="postgres"
    )
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{parsed.database}" WITH (FORCE)')
        await admin.execute(f'CREATE DATABASE "{parsed.database}"')
    finally:
        await admin.close()


def _migrate_in_a_process(url: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PLAUDIT_DATABASE_URL": url, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-c", "from services.cli import main; main()", "db", "upgrade"]
    return subprocess.Popen(command, env=env, cwd=ROOT, stderr=subprocess.PIPE)


async def test_two_processes_migrating_a_fresh_database_at_once_both_succeed() -> None:
    """Issue 23: a server and a worker starting on a new Postgres database raced to migrate
    it (UniqueViolation on alembic_version); an advisory lock makes the second one wait."""
    require_services()
    url = make_url(PG_MIGRATIONS_URL)
    url = url.set(database=f"{url.database}_race").render_as_string(hide_password=False)
    for _ in range(2):
        await _fresh_database(url)
        both = [_migrate_in_a_process(url) for _ in range(2)]
        errors = [p.communicate()[1].decode()[-400:] for p in both]
        assert [p.returncode for p in both] == [0, 0], errors
        engine = db.make_engine(url)
        try:
            async with engine.connect() as conn:
                versions = (await conn.execute(text("SELECT * FROM alembic_version"))).all()
        finally:
            await engine.dispose()
        assert [v[0] for v in versions] == [_head()]
    parsed = make_url(url)
    admin = await asyncpg.connect(
        host=parsed.host, port=parsed.port or 5432, user=parsed.username, database="postgres"
    )
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{parsed.database}" WITH (FORCE)')
    finally:
        await admin.close()


def _head() -> str:
    script = ScriptDirectory.from_config(db.alembic_config(PG_MIGRATIONS_URL))
    head = script.get_current_head()
    assert head is not None
    return head
