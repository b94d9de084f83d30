"""Shared fixtures: the embedded default and the real Postgres + Redis, side by side.

Postgres and Redis come from PLAUDIT_TEST_DATABASE_URL / PLAUDIT_TEST_REDIS_URL (defaults: the
local servers). When they are unreachable their tests skip, except under CI=true, where the
whole run fails instead.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis
from fastapi import FastAPI
from sqlalchemy import text
from sqlalchemy.engine import make_url

from services.app import create_app
from services.core.db import engine as db
from services.core.db.tables import Base
from services.core.models.embedder import Embedder, load_embedder
from services.settings import Settings

PG_URL = os.environ.get(
    "PLAUDIT_TEST_DATABASE_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/plaudit_test"
)
PG_MIGRATIONS_URL = os.environ.get(
    "PLAUDIT_TEST_MIGRATIONS_DATABASE_URL",
    "postgresql+asyncpg://postgres@127.0.0.1:5432/plaudit_test_migrations",
)
REDIS_URL = os.environ.get("PLAUDIT_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
#: A database at head that every Postgres test copies (``CREATE DATABASE ... TEMPLATE``), so
#: each test has a database of its own; nothing else may connect to it.
PG_TEMPLATE_URL = os.environ.get(
    "PLAUDIT_TEST_TEMPLATE_DATABASE_URL",
    make_url(PG_URL)
    .set(database=f"{make_url(PG_URL).database}_template")
    .render_as_string(hide_password=False),
)
#: Every table of every service (each keeps its own on the shared metadata), emptied after each
#: test on the shared database (tests whose worker process outlives one test), children first.
TABLES = tuple(table.name for table in reversed(Base.metadata.sorted_tables))
_COPIES = itertools.count()


async def _admin(url: str) -> Any:
    """A connection to the server of ``url``, on its ``postgres`` database."""
    import asyncpg

    parsed = make_url(url)
    return await asyncpg.connect(
        host=parsed.host,
        port=parsed.port or 5432,
        user=parsed.username,
        password=parsed.password,
        database="postgres",
    )


async def _create_databases() -> None:
    """Create the test databases when missing (best effort; .ci/run creates them too)."""
    for url in (PG_URL, PG_MIGRATIONS_URL, PG_TEMPLATE_URL):
        name = make_url(url).database
        try:
            conn = await _admin(url)
        except Exception:
            return
        try:
            exists = await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name)
            if not exists:
                await conn.execute(f'CREATE DATABASE "{name}"')
        finally:
            await conn.close()


async def _drop_abandoned_copies() -> None:
    """Drop the copies of the template that a test run which died left behind."""
    prefix = f"{make_url(PG_TEMPLATE_URL).database}_"
    conn = await _admin(PG_TEMPLATE_URL)
    try:
        names = await conn.fetch(
            "SELECT datname FROM pg_database WHERE starts_with(datname, $1)", prefix
        )
        for (name,) in names:
            pid = name[len(prefix) :].split("_")[0]
            if pid.isdigit() and not _alive(int(pid)):
                await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


async def _copy_template() -> str:
    """A new database copied from the migrated template; its URL."""
    template = make_url(PG_TEMPLATE_URL)
    name = f"{template.database}_{os.getpid()}_{next(_COPIES)}"
    conn = await _admin(PG_TEMPLATE_URL)
    try:
        await conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template.database}"')
    finally:
        await conn.close()
    return template.set(database=name).render_as_string(hide_password=False)


async def _drop(url: str) -> None:
    """Drop a test's database, ending whatever connections a test left open to it."""
    conn = await _admin(url)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{make_url(url).database}" WITH (FORCE)')
    finally:
        await conn.close()


async def _reachable() -> dict[str, str | None]:
    await _create_databases()
    problems: dict[str, str | None] = {"postgres": None, "redis": None}
    for name, url in (("postgres", PG_URL), ("postgres", PG_MIGRATIONS_URL)):
        engine = db.make_engine(url)
        try:
            async with engine.connect() as conn:
                await conn.execute(text("SELECT 1"))
        except Exception as exc:
            problems[name] = f"{url}: {exc}"
        finally:
            await engine.dispose()
    client = aioredis.from_url(REDIS_URL)
    try:
        await client.ping()
    except Exception as exc:
        problems["redis"] = f"{REDIS_URL}: {exc}"
    finally:
        await client.aclose()
    return problems


_PROBLEMS: dict[str, str | None] = {}


def pytest_sessionstart(session: pytest.Session) -> None:
    _PROBLEMS.update(asyncio.run(_reachable()))
    down = {k: v for k, v in _PROBLEMS.items() if v}
    if down and IN_CI:
        pytest.exit(f"CI=true but these are unreachable: {down}", returncode=3)


def require_services() -> None:
    down = {k: v for k, v in _PROBLEMS.items() if v}
    if down:
        pytest.skip(f"Postgres/Redis unreachable: {down}")


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    """The real bundled all-MiniLM-L6-v2, loaded once per test session."""
    return load_embedder("bundled")


@pytest.fixture(scope="session")
def model_cache_dir() -> Path:
    """Converted judge models, kept between test sessions (the first one converts)."""
    default = Path.home() / ".cache" / "plaudit-test" / "models"
    path = Path(os.environ.get("PLAUDIT_TEST_MODEL_CACHE", str(default)))
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="session")
async def judge_backend(model_cache_dir: Path) -> AsyncIterator[Any]:
    """The real SmolLM2-135M-Instruct judge (local transformers backend), started once."""
    from judges.backends.local import LocalBackend

    backend = LocalBackend(cache_dir=model_cache_dir, max_batch_size=8)
    await backend.start()
    yield backend
    await backend.aclose()


@pytest.fixture(scope="session")
def pg_migrated() -> str:
    """The shared Postgres test database at head (migrations run once per session), for tests
    whose worker process serves more than one test; the others get a copy of their own."""
    require_services()
    db.downgrade(PG_URL, "base")
    db.upgrade(PG_URL)
    return PG_URL


@pytest.fixture(scope="session")
def pg_template() -> str:
    """The template every test's own Postgres database is copied from, at head."""
    require_services()
    asyncio.run(_drop_abandoned_copies())
    db.downgrade(PG_TEMPLATE_URL, "base")
    db.upgrade(PG_TEMPLATE_URL)
    return PG_TEMPLATE_URL


async def _truncate(url: str) -> None:
    engine = db.make_engine(url)
    try:
        async with engine.begin() as conn:
            for table in TABLES:
                await conn.execute(text(f"DELETE FROM {table}"))
    finally:
        await engine.dispose()


async def _flush_redis() -> None:
    client = aioredis.from_url(REDIS_URL)
    try:
        await client.flushdb()
    finally:
        await client.aclose()


@pytest.fixture(scope="session")
def migrated_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An embedded database at head, migrated once per session (about a second each time)."""
    folder = tmp_path_factory.mktemp("sqlite-at-head")
    db.upgrade(f"sqlite+aiosqlite:///{folder / 'plaudit.db'}")
    return folder / "plaudit.db"


@pytest.fixture
def embedded_settings(tmp_path: Path, migrated_sqlite: Path) -> Settings:
    """The zero-configuration default: SQLite in a fresh data dir, in-process cache and jobs.

    The data dir starts with a copy of a database at head, so the start-up migration finds
    nothing to do (tests/migrations/test_migrations.py migrates fresh files itself)."""
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    shutil.copyfile(migrated_sqlite, data_dir / "plaudit.db")
    return Settings(data_dir=data_dir, _env_file=None)  # type: ignore[call-arg]


def _deployed(tmp_path: Path, database_url: str) -> Settings:
    return Settings(  # type: ignore[call-arg]
        data_dir=tmp_path / "data",
        database_url=database_url,
        redis_url=REDIS_URL,
        auto_migrate=False,
        _env_file=None,
    )


@pytest.fixture
async def deployed_settings(tmp_path: Path, pg_template: str) -> AsyncIterator[Settings]:
    """Postgres + Redis, as docker-compose deploys it, on a database of the test's own (a copy
    of the migrated template, dropped after the test)."""
    url = await _copy_template()
    await _flush_redis()
    try:
        yield _deployed(tmp_path, url)
    finally:
        await _drop(url)
        await _flush_redis()


@pytest.fixture
async def shared_deployed_settings(tmp_path: Path, pg_migrated: str) -> AsyncIterator[Settings]:
    """Postgres + Redis on the shared test database, for tests whose worker process outlives
    one test (a module's ``plaudit worker``); its tables are emptied after each test."""
    await _flush_redis()
    yield _deployed(tmp_path, pg_migrated)
    await _truncate(pg_migrated)
    await _flush_redis()


@pytest.fixture(params=["embedded", "postgres"])
def settings(request: pytest.FixtureRequest) -> Settings:
    """Each test that takes ``settings`` runs on both set-ups."""
    name = "embedded_settings" if request.param == "embedded" else "deployed_settings"
    value: Settings = request.getfixturevalue(name)
    return value


@pytest.fixture
def app_overrides() -> dict[str, Any]:
    """Settings fields a test module wants to change (override this fixture)."""
    return {}


@pytest.fixture
async def app(
    settings: Settings, embedder: Embedder, judge_backend: Any, app_overrides: dict[str, Any]
) -> AsyncIterator[FastAPI]:
    """The all-in-one app, started (lifespan run), on the given settings, real models."""
    active = settings.with_overrides(**app_overrides)
    application = create_app(active, embedder=embedder, judge_backend=judge_backend)
    async with application.router.lifespan_context(application):
        yield application


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """An in-process HTTP client (httpx ASGI transport)."""
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://plaudit.test") as c:
        yield c


def assert_envelope(
    response: httpx.Response, status: int, param: str | None = None
) -> dict[str, Any]:
    """The error envelope, with the status, a request id and (when given) the named field."""
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"}, body
    error = body["error"]
    assert set(error) == {"type", "message", "param", "request_id"}
    assert error["message"]
    assert error["request_id"] == response.headers["x-request-id"]
    assert "Traceback" not in response.text
    if param is not None:
        assert error["param"] == param, error
    return dict(error)


@pytest.fixture
def data_dir_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    path = tmp_path / "env-data"
    monkeypatch.setenv("PLAUDIT_DATA_DIR", str(path))
    yield path
