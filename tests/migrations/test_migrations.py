"""Alembic migrations upgrade and downgrade on SQLite and on the real Postgres."""

from __future__ import annotations

import asyncio
import json
import os
import re
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

from services.core.db import engine as db
from services.core.db.tables import Base
from services.core.store.artifacts import ArtifactStore
from services.rubrics.repository import ArtifactRubricRepository, ListFilter
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
    command = [sys.executable, "-c", "from services.cli.main import main; main()", "db", "upgrade"]
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


_OWNER = "key_00000000000000bb"
_TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:")


async def _insert_rubrics(url: str) -> dict[str, list[tuple[Any, ...]]]:
    """Two rubrics as 0011 kept them: one edited twice and rolled back to version 1 (with
    notes), one new; answers the rows as read back."""
    engine = db.make_engine(url)
    t0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
    t1 = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
    c = [{"id": "c1", "text": "Boils lower", "weight": 1.0, "kind": "required", "anchor": False}]
    content = {
        "name": "boil",
        "question": "Why?",
        "reference_answer": None,
        "domain": "science",
        "source": "tests",
        "criteria": c,
    }
    renamed = {**content, "name": "boil-2"}
    heads = [
        ("rb_aaaaaaaaaaaaaaaaaaaa", _OWNER, "boil", "science", "tests", 1, 3, 7, t0, t1),
        ("rb_bbbbbbbbbbbbbbbbbbbb", None, "boil", "science", "tests", 1, 1, 2, t0, t0),
    ]
    versions = [
        ("rb_aaaaaaaaaaaaaaaaaaaa", 1, content, None, t0),
        ("rb_aaaaaaaaaaaaaaaaaaaa", 2, renamed, "renamed", t0),
        ("rb_aaaaaaaaaaaaaaaaaaaa", 3, content, "x" * 700, t1),
        ("rb_bbbbbbbbbbbbbbbbbbbb", 1, content, None, t0),
    ]
    try:
        async with engine.begin() as conn:
            for head in heads:
                await conn.execute(
                    text("INSERT INTO rubrics VALUES (:a, :b, :c, :d, :e, :f, :g, :h, :i, :j)"),
                    dict(zip("abcdefghij", head, strict=True)),
                )
            for rid, number, body, note, at in versions:
                await conn.execute(
                    text("INSERT INTO rubric_versions VALUES (:r, :v, :c, :h, :n, :t)"),
                    {
                        "r": rid,
                        "v": number,
                        "c": json.dumps(body),
                        "h": "h" * 64,
                        "n": note,
                        "t": at,
                    },
                )
    finally:
        await engine.dispose()
    return await _rubric_rows(url)


async def _rubric_rows(url: str) -> dict[str, list[tuple[Any, ...]]]:
    engine = db.make_engine(url)
    try:
        async with engine.connect() as conn:
            heads = await conn.execute(text("SELECT * FROM rubrics ORDER BY id"))
            versions = await conn.execute(
                text("SELECT * FROM rubric_versions ORDER BY rubric_id, version")
            )
            return {"heads": [_plain(r) for r in heads], "versions": [_plain(r) for r in versions]}
    finally:
        await engine.dispose()


def _plain(row: Any) -> tuple[Any, ...]:
    """A row with its times in UTC and its JSON decoded (SQLite hands back text)."""
    out = []
    for value in row:
        if isinstance(value, str) and _TIMESTAMP.match(value):  # SQLite's text times
            value = datetime.fromisoformat(value)
        if isinstance(value, datetime):
            value = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
        elif isinstance(value, str) and value.startswith("{"):
            value = json.loads(value)
        out.append(value)
    return tuple(out)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_rubrics_move_into_the_artifact_store_and_back(backend: str, tmp_path: Path) -> None:
    """0012 (issue 20): every rubric becomes an artifact of kind ``rubric`` with its id, owner,
    version numbers, pointer, notes and next criterion number; the rubric API reads them
    there; downgrade gives back the same rubric rows."""
    if backend == "postgres":
        require_services()
        url = PG_MIGRATIONS_URL
        await asyncio.to_thread(db.downgrade, url, "base")
    else:
        url = f"sqlite+aiosqlite:///{tmp_path / 'rubrics.db'}"
    await asyncio.to_thread(db.upgrade, url, "0011")
    before = await _insert_rubrics(url)
    await asyncio.to_thread(db.upgrade, url, "0012")
    assert not {"rubrics", "rubric_versions"} & await _tables(url)

    engine = db.make_engine(url)
    store = ArtifactStore(db.make_sessionmaker(engine), tmp_path)
    repository = ArtifactRubricRepository(store)
    try:
        page, total = await store.list_artifacts(kind="rubric")
        assert total == 2 and [a.owner for a in page] == [_OWNER, None]
        head = await repository.head("rb_aaaaaaaaaaaaaaaaaaaa")
        assert head is not None
        assert (head.current_version, head.latest_version, head.next_criterion) == (1, 3, 7)
        assert (head.name, head.owner) == ("boil", _OWNER)
        notes = [v.note for v in await repository.versions(head.id)]
        assert notes == [None, "renamed", "x" * 700]
        second = await store.get(head.id, 2)
        assert second.content["name"] == "boil-2" and second.parent_version == 1
        events, _ = await store.history(head.id)
        assert [(e.action, e.to_version) for e in events] == [
            ("rollback", 1),
            ("create", 3),
            ("create", 2),
            ("create", 1),
        ]
        assert events[1].note == "x" * 500
        listed, count = await repository.page(ListFilter(name="boil"), limit=10, offset=0)
        assert count == 2 and {h.id for h in listed} == {r[0] for r in before["heads"]}
    finally:
        await engine.dispose()

    await asyncio.to_thread(db.downgrade, url, "0011")
    assert await _artifact_names(url) == {
        t: set() for t in ("artifacts", "artifact_versions", "artifact_events")
    }
    after = await _rubric_rows(url)
    assert after["heads"] == before["heads"]
    # content hashes are recomputed on the way up (the store's hash), so compare the rest
    assert [v[:3] + v[4:] for v in after["versions"]] == [v[:3] + v[4:] for v in before["versions"]]
    await asyncio.to_thread(db.downgrade, url, "base")
