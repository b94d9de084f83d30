"""Outages of the database and Redis become 503 answers that name what is down (issues 9, 23).

This module is the one mapping from "the database or Redis cannot serve now" to a 503 with
Retry-After: repositories open sessions through :func:`transaction` and :func:`reading`, which
turn an outage into :class:`DatabaseUnavailable`, and :func:`as_outage` classifies any other
exception that escapes to the app (the fallback handler in the envelope). What counts as an
outage:

- Postgres, by SQLSTATE: connection exceptions (class 08), insufficient resources (class 53:
  too many connections, disk full, out of memory), shutdown and "cannot connect now" (57P01,
  57P02, 57P03), idle-session timeout (57P05), statement timeout or an operator's cancel
  (57014), lock timeout (55P03), a read-only database or standby (25006), an I/O error (58030),
  and "database is not currently accepting connections" (55000 with that message only: 55000
  alone also names programming errors);
- SQLite: ``OperationalError`` (locked, busy, read-only file, disk I/O);
- either: a refused, reset or timed-out connection (OSError, TimeoutError, SQLAlchemy's
  pool timeout and invalidated connections);
- Redis: connection errors and timeouts (also "max number of clients reached" and LOADING),
  a read-only replica (READONLY), and the server's own refusals to write now (MISCONF, OOM,
  MASTERDOWN, TRYAGAIN, CLUSTERDOWN, NOREPLICAS).
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
_OUTAGE_CLASSES = ("08", "53")
_OUTAGE_STATES = frozenset({"57P01", "57P02", "57P03", "57P05", "57014", "55P03", "25006", "58030"})
_NOT_ACCEPTING = ("55000", "not currently accepting connections")
_REDIS_DOWN = (
    redis_errors.ConnectionError,  # also LOADING (BusyLoadingError) and max clients
    redis_errors.TimeoutError,
    redis_errors.ReadOnlyError,
    redis_errors.OutOfMemoryError,
    redis_errors.TryAgainError,
    redis_errors.ClusterDownError,  # also MASTERDOWN
)
_REDIS_REFUSALS = (
    "MISCONF",
    "OOM",
    "LOADING",
    "MASTERDOWN",
    "TRYAGAIN",
    "CLUSTERDOWN",
    "NOREPLICAS",
)


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


def is_redis_outage(exc: BaseException) -> bool:
    """Redis is unreachable, loading, read-only or refusing writes for now."""
    if isinstance(exc, _REDIS_DOWN):
        return True
    if isinstance(exc, redis_errors.ResponseError):
        return str(exc).split(" ", 1)[0] in _REDIS_REFUSALS
    return isinstance(exc, OSError) and _raised_in(exc, ("redis",))


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
    """The driver's own words for a database that cannot serve now (the SQLSTATEs in the
    module docstring; class 08 also covers asyncpg's "connection was closed in the middle of
    operation")."""
    if isinstance(exc, OSError | TimeoutError):
        return True
    state = str(getattr(exc, "sqlstate", None) or "")
    if state[:2] in _OUTAGE_CLASSES or state in _OUTAGE_STATES:
        return True
    if state == _NOT_ACCEPTING[0] and _NOT_ACCEPTING[1] in str(exc):
        return True
    # asyncpg's protocol state after the server cut the connection mid-operation ("cannot
    # switch to state 11; another operation is in progress"): the connection is unusable.
    return type(exc).__module__.startswith("asyncpg") and type(exc).__name__ == (
        "InternalClientError"
    )


def as_outage(exc: BaseException) -> PlauditError | None:
    """The 503 error for an outage of the database or Redis, else None."""
    if is_redis_outage(exc):
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
