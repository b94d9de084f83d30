"""``plaudit serve --workers 2``: two processes, one judge cache on Redis (issue 19), one
embedded SQLite database migrated once by ``serve`` rather than by each worker at once.

The judge is the stand-in OpenAI server (tests/judges/openai_standin.py, in this process). A
pairwise request is judged once (two upstream calls, one per order); the same request sent
again many times on fresh connections is then answered from the Redis cache by both workers,
including the one that never called the judge. No fence secret is configured: ``serve``
draws one for all its workers, or each would render different prompts (and cache keys).
"""

from __future__ import annotations

import re
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from services.cli.main import app
from services.settings import Settings
from tests.judges.openai_standin import MODEL, StandIn, stand_in_server
from tests.services.core.jobs.conftest import jobs_env, process
from tests.serving import free_port

pytestmark = pytest.mark.slow

CACHE_LINE = re.compile(r'^plaudit_judge_cache_total\{outcome="(\w+)"\} ([0-9.e+]+)$', re.M)


def test_workers_without_redis_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PLAUDIT_REDIS_URL", raising=False)
    result = CliRunner().invoke(app, ["serve", "judge", "--workers", "2"])
    assert result.exit_code == 2
    assert "PLAUDIT_REDIS_URL" in result.output


def _cache_counts(url: str) -> dict[str, float]:
    """One worker's judge cache counters (a fresh connection reaches either worker)."""
    text = httpx.get(f"{url}/metrics", timeout=10).text
    return {outcome: float(n) for outcome, n in CACHE_LINE.findall(text)}


def _wait_live(url: str, proc_log: Path) -> None:
    for _ in range(600):
        try:
            if httpx.get(f"{url}/health/ready", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    pytest.fail(f"not ready:\n{proc_log.read_text()}")


def test_two_workers_share_one_judge_cache(tmp_path: Path, deployed_settings: Settings) -> None:
    with stand_in_server() as stand_in:
        _check_shared_cache(tmp_path, deployed_settings, stand_in)


def _check_shared_cache(tmp_path: Path, settings: Settings, stand_in: StandIn) -> None:
    run_id = uuid.uuid4().hex[:12]
    env = jobs_env(
        settings,
        PLAUDIT_JUDGE_BACKEND="openai",
        PLAUDIT_JUDGE_BASE_URL=stand_in.url("proper", run_id),
        PLAUDIT_JUDGE_MODEL=MODEL,
    )
    del env["PLAUDIT_JUDGE_FENCE_SECRET"]  # serve --workers must give both workers one
    # The embedded SQLite file, which serve --workers must migrate once, not once per worker.
    for name in ("PLAUDIT_DATABASE_URL", "PLAUDIT_AUTO_MIGRATE"):
        env.pop(name, None)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    argv = ["serve", "judge", "--host", "127.0.0.1", "--port", str(port), "--workers", "2"]
    log = tmp_path / "serve.log"
    body = {"prompt": f"Which is right? {run_id}", "response_a": "pick A", "response_b": "no"}
    with process(argv, env, log):
        _wait_live(url, log)
        first = httpx.post(f"{url}/v1/judge/pairwise", json=body, timeout=60)
        assert first.status_code == 200, first.text
        readings = _until_both_workers_hit(url, body)
    assert len(stand_in.run(run_id).bodies) == 2  # judged once, in both orders
    # Each worker configured logging: one access line per request, and no uvicorn duplicate.
    lines = log.read_text().splitlines()
    assert sum("plaudit.access" in line and "/v1/judge/pairwise 200" in line for line in lines) > 1
    assert not any("uvicorn.access" in line for line in lines)
    assert not any("services.core.resources" in line and "migrating" in line for line in lines)
    # A worker that never called the judge (no miss) answered from the cache the other filled.
    assert any(r.get("miss", 0) == 0 and r.get("hit", 0) > 0 for r in readings), readings
    assert any(r.get("miss", 0) > 0 for r in readings), readings


def _until_both_workers_hit(url: str, body: dict[str, str]) -> list[dict[str, float]]:
    """Send the judged request again (8 at a time, fresh connections) until the metrics show
    two workers with cache hits; returns the readings seen."""
    readings: list[dict[str, float]] = []

    def again(_: int) -> int:
        return httpx.post(f"{url}/v1/judge/pairwise", json=body, timeout=60).status_code

    with ThreadPoolExecutor(8) as pool:
        for _ in range(20):
            assert set(pool.map(again, range(16))) == {200}
            readings += list(pool.map(lambda _: _cache_counts(url), range(16)))
            if {r.get("miss", 0) > 0 for r in readings if r.get("hit", 0) > 0} == {True, False}:
                break
    return readings
