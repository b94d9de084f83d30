"""Outages of the database and Redis become 503 answers that name what is down (issue 9).

Repositories open sessions through :func:`transaction` and :func:`reading`, which turn a lost
or refused connection into :class:`DatabaseUnavailable`; :func:`as_outage` classifies any other
exception that escapes to the app (the fallback handler in the envelope).
"""

from __future__ import annotations

import traceback
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from redis import exceptions as redis_errors
from sqlalchemy import exc as sa_errors
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from services.core.errors import CacheUnavailable, DatabaseUnavailable, PlauditError

RETRY_AFTER_S = 2.0
_DRIVERS = ("sqlalchemy", "asyncpg", "aiosqlite", "sqlite3")
_DB_DOWN = (
    sa_errors.OperationalError,
    sa_errors.InterfaceError,
    sa_errors.DisconnectionError,
    sa_errors.TimeoutError,
)
_LOST_STATES = ("57P01", "57P02", "57P03", "53300")
_REDIS_DOWN = (redis_errors.ConnectionError, redis_errors.TimeoutError)


def database_unavailable() -> DatabaseUnavailable:
    return DatabaseUnavailable(
        "the database is unavailable; nothing was stored, retry later", retry_after=RETRY_AFTER_S
    )


def cache_unavailable() -> CacheUnavailable:
    return CacheUnavailable("Redis is unavailable; retry later", retry_after=RETRY_AFTER_S)


def is_database_outage(exc: BaseException) -> bool:
    """A refused, dropped or timed-out database connection (not a bad query)."""
    if isinstance(exc, _DB_DOWN):
        return True
    if isinstance(exc, sa_errors.DBAPIError) and exc.connection_invalidated:
        return True
    if isinstance(exc, sa_errors.DBAPIError):
        return any(_connection_lost(cause) for cause in _causes(exc))
    # asyncpg raises OSError (connection refused) itself, before SQLAlchemy can wrap it.
    return isinstance(exc, OSError | TimeoutError) and _raised_in(exc, _DRIVERS)


def _causes(exc: BaseException) -> list[BaseException]:
    """``exc``, the driver error it wraps, and their causes (a short chain)."""
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen and len(seen) < 8:
        seen.append(current)
        orig = getattr(current, "orig", None)
        nxt = orig if isinstance(orig, BaseException) and orig not in seen else None
        current = nxt or current.__cause__ or current.__context__
    return seen


def _connection_lost(exc: BaseException) -> bool:
    """The driver's own words for a lost connection: SQLSTATE class 08 (connection
    exception, also asyncpg's "connection was closed in the middle of operation"), 57P01-57P03
    (shutdown, cannot connect now), 53300 (too many connections)."""
    if isinstance(exc, OSError | TimeoutError):
        return True
    state = str(getattr(exc, "sqlstate", None) or "")
    if state.startswith("08") or state in _LOST_STATES:
        return True
    # asyncpg's protocol state after the server cut the connection mid-operation ("cannot
    # switch to state 11; another operation is in progress"): the connection is unusable.
    return type(exc).__module__.startswith("asyncpg") and type(exc).__name__ == (
        "InternalClientError"
    )


def as_outage(exc: BaseException) -> PlauditError | None:
    """The 503 error for an outage of the database or Redis, else None."""
    if isinstance(exc, _REDIS_DOWN) or (isinstance(exc, OSError) and _raised_in(exc, ("redis",))):
        return cache_unavailable()
    if is_database_outage(exc):
        return database_unavailable()
    return None


@asynccontextmanager
async def transaction(sessions: async_sessionmaker[AsyncSession]) -> AsyncIterator[AsyncSession]:
    """A session in a transaction, committed on exit; an outage is a DatabaseUnavailable."""
    try:
        async with sessions() as session, session.begin():
            yield session
    except Exception as exc:
        if is_database_outage(exc):
            raise database_unavailable() from exc
        raise


@asynccontextmanager
async def reading(sessions: async_sessionmaker[AsyncSession]) -> AsyncIterator[AsyncSession]:
    """A session for reads; an outage is a DatabaseUnavailable."""
    try:
        async with sessions() as session:
            yield session
    except Exception as exc:
        if is_database_outage(exc):
            raise database_unavailable() from exc
        raise


def _raised_in(exc: BaseException, packages: tuple[str, ...]) -> bool:
    """True when a frame of ``exc``'s traceback belongs to one of ``packages``."""
    for frame, _ in traceback.walk_tb(exc.__traceback__):
        module = str(frame.f_globals.get("__name__", ""))
        if module.split(".")[0] in packages:
            return True
    return False
