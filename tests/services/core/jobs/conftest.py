"""Job tests on both runners: in-process (SQLite) and arq on Redis through a real
``plaudit worker`` process (Postgres), with the same tests for both.

The worker subprocess is started once per module and loads the real SmolLM2 judge, so the
evaluation job it runs measures a real model. Settings are short (heartbeat 0.2 s, lease 5 s)
so that cancellation and recovery show within seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from pydantic import SecretStr

from services.core.jobs.settings import JobsSettings
from services.core.settings import Scope
from services.core.web.auth import key_owner
from services.judge.app import create_app
from services.settings import Settings
from tests.conftest import REDIS_URL, require_services

KEYS = {
    "alice-key": [Scope.reward],
    "bob-key": [Scope.reward],
    "root-key": [Scope.reward, Scope.admin],
}
ALICE, BOB, ROOT = (key_owner(k) for k in ("alice-key", "bob-key", "root-key"))
#: The lease is many heartbeats long: on a loaded CI box a live process that stalls for a
#: moment must not lose its jobs to another one (a dead one is noticed by pid at once).
FAST_JOBS = {"heartbeat_s": 0.2, "lease_s": 5.0, "concurrency": 1, "sweep_interval_s": 60.0}
#: One judge fence secret for the test process and every worker it starts, so a worker renders
#: the same judge prompts (same boundary codes) as the test does (issue 9's fences).
FENCE_SECRET = "jobs-tests-fence-secret"
FINISHED = ("succeeded", "failed", "cancelled")
PLAUDIT = Path(sys.executable).with_name("plaudit")


def jobs_env(settings: Settings, **extra: str) -> dict[str, str]:
    """The environment of a plaudit subprocess sharing ``settings``' database and Redis."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLAUDIT_")}
    env.update(
        OMP_NUM_THREADS="1",  # torch threads of several processes on few cores wait on each other
        PLAUDIT_DATA_DIR=str(settings.data_dir),
        PLAUDIT_JUDGE_FENCE_SECRET=FENCE_SECRET,
        PLAUDIT_LOG_LEVEL="INFO",
        **{f"PLAUDIT_JOBS_{k.upper()}": str(v) for k, v in FAST_JOBS.items()},
    )
    if settings.database_url:  # migrated once per test session (pg_migrated)
        env["PLAUDIT_DATABASE_URL"] = settings.database_url
        env["PLAUDIT_AUTO_MIGRATE"] = "false"
    if settings.redis_url:
        env["PLAUDIT_REDIS_URL"] = settings.redis_url
    env.update(extra)
    return env


#: A judge configuration that loads nothing (never called by the probe job).
IDLE_JUDGE = {
    "PLAUDIT_JUDGE_BACKEND": "openai",
    "PLAUDIT_JUDGE_BASE_URL": "http://127.0.0.1:9/v1",
    "PLAUDIT_JUDGE_MODEL": "unused",
}


@contextlib.contextmanager
def process(
    argv: list[str], env: Mapping[str, str], log: Path
) -> Iterator[subprocess.Popen[bytes]]:
    """A plaudit subprocess logging to ``log``; stopped (SIGTERM, then SIGKILL) at the end."""
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [str(PLAUDIT), *argv], env=dict(env), stdout=out, stderr=subprocess.STDOUT
        )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@dataclass
class Runner:
    """One job set-up: its name, the app's settings, and the worker process (arq only)."""

    name: str
    settings: Settings
    worker: subprocess.Popen[bytes] | None = None

    @property
    def worker_role(self) -> str:
        return "worker" if self.name == "arq" else "inprocess"


@pytest.fixture(scope="module")
def arq_worker_process(
    tmp_path_factory: pytest.TempPathFactory, pg_migrated: str, model_cache_dir: Path
) -> Iterator[subprocess.Popen[bytes]]:
    """A real ``plaudit worker`` with the real local judge, for the module's arq tests."""
    data = tmp_path_factory.mktemp("worker")
    settings = Settings(  # type: ignore[call-arg]
        data_dir=data, database_url=pg_migrated, redis_url=REDIS_URL, _env_file=None
    )
    env = jobs_env(settings, PLAUDIT_MODEL_CACHE_DIR=str(model_cache_dir))
    with process(["worker"], env, data / "worker.log") as proc:
        yield proc
        if proc.poll() is not None:
            pytest.fail(f"plaudit worker exited:\n{(data / 'worker.log').read_text()}")


@pytest.fixture(params=["inprocess", "arq"])
def runner(request: pytest.FixtureRequest, tmp_path: Path) -> Runner:
    jobs = JobsSettings(**FAST_JOBS)  # type: ignore[arg-type]
    if request.param == "inprocess":
        base: Settings = request.getfixturevalue("embedded_settings")
        update = {"api_keys": KEYS, "jobs": jobs, "judge": _fenced(base)}
        return Runner("inprocess", base.model_copy(update=update))
    require_services()
    base = request.getfixturevalue("shared_deployed_settings")
    worker = request.getfixturevalue("arq_worker_process")
    settings = base.model_copy(update={"api_keys": KEYS, "jobs": jobs, "judge": _fenced(base)})
    return Runner("arq", settings, worker)


def _fenced(settings: Settings) -> Any:
    return settings.judge.model_copy(update={"fence_secret": SecretStr(FENCE_SECRET)})


def with_jobs(settings: Settings, **changes: Any) -> Settings:
    return settings.model_copy(update={"jobs": settings.jobs.model_copy(update=changes)})


@contextlib.asynccontextmanager
async def started(settings: Settings, judge_backend: Any) -> AsyncIterator[FastAPI]:
    """The judge app (judge + job API) with its lifespan run: a server start."""
    app = create_app(settings, judge_backend=judge_backend)
    async with app.router.lifespan_context(app):
        yield app


@pytest.fixture
async def app(runner: Runner, judge_backend: Any) -> AsyncIterator[FastAPI]:
    async with started(runner.settings, judge_backend) as application:
        yield application
        await _stop_active(application)


async def _stop_active(app: FastAPI) -> None:
    """Cancel what a test left running, so the worker is free for the next test."""
    store = app.state.resources.jobs.store
    for job in await store.active():
        await app.state.resources.jobs.cancel(job.id)
    for _ in range(100):
        if not await store.active():
            return
        await asyncio.sleep(0.1)


Client = Callable[[str], httpx.AsyncClient]


@pytest.fixture
async def as_key(app: FastAPI) -> AsyncIterator[Client]:
    """``as_key("alice-key")``: an in-process HTTP client sending that API key."""
    clients: list[httpx.AsyncClient] = []

    def make(key: str) -> httpx.AsyncClient:
        client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app),
            base_url="http://plaudit.test",
            headers={"Authorization": f"Bearer {key}"},
        )
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.aclose()


async def wait_until(
    client: httpx.AsyncClient,
    job_id: str,
    done: Callable[[dict[str, Any]], bool],
    *,
    within: float = 120.0,
) -> dict[str, Any]:
    """Poll the job until ``done(job)``; fails with the last record after ``within`` s."""
    deadline = time.monotonic() + within
    while True:
        response = await client.get(f"/v1/jobs/{job_id}")
        assert response.status_code == 200, response.text
        job: dict[str, Any] = response.json()
        if done(job):
            return job
        if time.monotonic() > deadline:
            pytest.fail(f"job {job_id} never reached the expected state: {job}")
        await asyncio.sleep(0.05)


def finished(job: dict[str, Any]) -> bool:
    return job["state"] in FINISHED
