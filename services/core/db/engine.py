"""SQLAlchemy 2.0 async engine, sessions and Alembic migrations (SQLite and Postgres)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import event, text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker, create_async_engine

import migrations

#: How long a SQLite connection waits for another writer before "database is locked".
SQLITE_BUSY_TIMEOUT_S = 15.0


def make_engine(url: str) -> AsyncEngine:
    """An async engine. A SQLite file gets a created parent folder, write-ahead logging
    (readers, such as a poller or a second process, then never block a writer) and a busy
    timeout long enough for the writes of the server, its jobs and a worker to take turns."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return create_async_engine(url, pool_pre_ping=True)
    if parsed.database in (None, "", ":memory:"):
        return create_async_engine(url)
    Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
    engine = create_async_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S})
    event.listen(engine.sync_engine, "connect", _write_ahead_log)
    return engine


def _write_ahead_log(connection: Any, _record: Any) -> None:
    cursor = connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.close()


def make_sessionmaker(engine: AsyncEngine) -> async_sessionmaker:  # type: ignore[type-arg]
    return async_sessionmaker(engine, expire_on_commit=False)


async def ping(engine: AsyncEngine) -> bool:
    """True when the database answers a trivial query."""
    try:
        async with engine.connect() as conn:
            await conn.execute(text("SELECT 1"))
        return True
    except Exception:
        return False


def alembic_config(url: str) -> Config:
    """An Alembic config pointing at the packaged ``migrations`` folder."""
    folder = Path(migrations.__file__).parent
    cfg = Config()
    cfg.set_main_option("script_location", str(folder))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def upgrade(url: str, revision: str = "head") -> None:
    """Migrate the database to ``revision`` (blocking; run it off the event loop)."""
    _ensure_sqlite_dir(url)
    command.upgrade(alembic_config(url), revision)


def downgrade(url: str, revision: str) -> None:
    command.downgrade(alembic_config(url), revision)


def head_revisions(url: str) -> set[str]:
    """The revisions the packaged migrations end at."""
    return set(ScriptDirectory.from_config(alembic_config(url)).get_heads())


async def current_revisions(url: str) -> set[str]:
    """The revisions the database is at (empty: never migrated); raises when unreachable."""
    engine = make_engine(url)
    try:
        async with engine.connect() as conn:
            heads = await conn.run_sync(
                lambda sync: MigrationContext.configure(sync).get_current_heads()
            )
    finally:
        await engine.dispose()
    return set(heads)


async def wait_for_head(url: str, timeout_s: float, every_s: float = 2.0) -> str | None:
    """Poll until the database is at the migrations' head; None when it is, else what it was
    last (a deployment's API and worker wait for the migration job with this: issue 21)."""
    wanted = head_revisions(url)
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        try:
            found = await current_revisions(url)
            state = f"at {', '.join(sorted(found)) or 'no revision'}, want {', '.join(wanted)}"
        except Exception as exc:  # unreachable or not yet created: keep waiting
            found, state = set(), f"unreachable ({type(exc).__name__})"
        if found == wanted:
            return None
        if asyncio.get_running_loop().time() >= deadline:
            return state
        await asyncio.sleep(every_s)


async def upgrade_async(url: str) -> None:
    """Run the migrations from async code: Alembic's async env needs its own loop."""
    await asyncio.to_thread(upgrade, url)


def _ensure_sqlite_dir(url: str) -> None:
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
