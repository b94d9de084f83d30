"""Alembic environment: async engines for SQLite (aiosqlite) and Postgres (asyncpg)."""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import create_async_engine

from services.app import components
from services.core.db.tables import Base

# Each service keeps its tables in its own folder on the shared metadata; building the list of
# services imports them all (issue 20).
components()
target_metadata = Base.metadata
#: The advisory lock that serialises migrations of one Postgres database (any 64-bit number
#: that no other code uses; the digits spell "plaudit").
MIGRATION_LOCK = 7_528_124_384


def _run(connection: Connection) -> None:
    if connection.dialect.name == "postgresql":
        # Issue 23: a server and a worker starting on a new database both migrated it and one
        # failed (UniqueViolation on alembic_version). The lock is held until the migrations'
        # transaction commits; whoever waited then reads the version table afresh and finds
        # nothing to do.
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK})
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()


async def _run_async(url: str) -> None:
    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:
            await conn.run_sync(_run)
            await conn.commit()
    finally:
        await engine.dispose()


def run_offline(url: str) -> None:
    context.configure(url=url, target_metadata=target_metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


_url = context.config.get_main_option("sqlalchemy.url") or ""
if context.is_offline_mode():
    run_offline(_url)
else:
    asyncio.run(_run_async(_url))
