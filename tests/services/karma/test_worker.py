"""The deployed set-up: Postgres, Redis and a real ``plaudit worker`` that runs ``karma.train``;
the API process, which trained nothing itself, serves the version the worker stored (same
database, same data directory)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest

from services.karma.app import create_app
from services.karma.settings import KarmaSettings
from services.settings import Settings
from tests.services.core.jobs.conftest import IDLE_JUDGE, jobs_env, process
from tests.services.karma.conftest import KEYS, TINY, needs_shared
from tests.services.karma.slice import write_slice
from tests.services.karma.test_serving import CONTEXT, REPLIES, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.postgres, needs_shared]


async def test_a_worker_trains_and_the_api_serves_what_it_stored(
    deployed_settings: Settings, tmp_path: Path
) -> None:
    sliced = write_slice(tmp_path / "reddit_karma", {"train": 24, "dev": 4, "test": 8})
    settings = deployed_settings.model_copy(
        update={"api_keys": KEYS, "karma": KarmaSettings(data_dir=sliced)}
    )
    env = jobs_env(settings, PLAUDIT_KARMA_DATA_DIR=str(sliced), **IDLE_JUDGE)
    log = tmp_path / "worker.log"
    app = create_app(settings)
    with process(["worker"], env, log) as worker:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            headers = {"Authorization": "Bearer root-key"}
            async with httpx.AsyncClient(
                transport=transport, base_url="http://t", headers=headers
            ) as root:
                job = await _train(root, worker, log)
                assert job["state"] == "succeeded", (job["error"], log.read_text()[-3000:])
                assert job["worker"].split(":")[2].startswith("worker")
                assert job["result"]["model"] == {"name": "karma", "version": 1, "serving": True}
                scored = await root.post(
                    "/v1/karma/score", json={"context": CONTEXT, "replies": REPLIES}
                )
                assert scored.status_code == 200, scored.text
                assert scored.json()["model"]["version"] == 1


async def _train(root: httpx.AsyncClient, worker: Any, log: Path) -> dict[str, Any]:
    response = await root.post("/v1/karma/train", json=TINY)
    assert response.status_code == 202, response.text
    job_id = response.json()["id"]
    waiting = asyncio.ensure_future(wait_for(root, job_id))
    while not waiting.done():
        if worker.poll() is not None:
            waiting.cancel()
            pytest.fail(f"plaudit worker exited:\n{log.read_text()}")
        await asyncio.sleep(0.5)
    return waiting.result()
