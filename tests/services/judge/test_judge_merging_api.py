"""Through the judge app: concurrent /v1/judge/scale requests share the model's passes.

The app builds its own local backend from settings here (not the session's shared one), so
the lifespan starts it, /metrics sees its merged calls and /health/ready its readiness.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from services.judge.app import create_app
from services.settings import Settings
from tests.conftest import assert_envelope

pytestmark = pytest.mark.slow

QUESTION = "Why is the sky blue on a clear day?"
ANSWERS = [
    "Rayleigh scattering: air molecules scatter short blue wavelengths far more than red.",
    "Because the ocean reflects onto it.",
    "Sunlight is scattered by the atmosphere, and blue light is scattered the most.",
    "It is not; it only looks that way.",
]


@asynccontextmanager
async def started_client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            yield client


def _metric(text: str, name: str) -> float:
    """The value of one sample line of a Prometheus text exposition."""
    line = next(line for line in text.splitlines() if line.startswith(name + " "))
    return float(line.rsplit(" ", 1)[1])


async def wait_ready(client: httpx.AsyncClient) -> httpx.Response:
    for _ in range(600):
        response = await client.get("/health/ready")
        if response.status_code == 200 or "failed" in response.text:
            return response
        await asyncio.sleep(0.1)
    raise AssertionError("the judge never finished loading")


async def test_concurrent_scale_requests_are_merged(tmp_path: Path, model_cache_dir: Path) -> None:
    settings = Settings(  # type: ignore[call-arg]
        data_dir=tmp_path,
        model_cache_dir=model_cache_dir,
        judge_batch_max_wait_ms=50,
        _env_file=None,
    )
    async with started_client(create_app(settings)) as client:
        assert (await wait_ready(client)).status_code == 200
        body = {"prompt": QUESTION, "k": 5, "cache": False}
        answers = [ANSWERS[i:] + ANSWERS[:i] for i in range(4)]
        responses = await asyncio.gather(
            *(client.post("/v1/judge/scale", json={**body, "completions": a}) for a in answers)
        )
        alone = await client.post("/v1/judge/scale", json={**body, "completions": answers[0]})
        assert all(r.status_code == 200 for r in responses), [r.text for r in responses]
        merged = [r["distribution"] for r in responses[0].json()["results"]]
        single = [r["distribution"] for r in alone.json()["results"]]
        for m, s in zip(merged, single, strict=True):
            assert m == pytest.approx(s, abs=1e-4)
        metrics = (await client.get("/metrics")).text
        # Ideally two model calls: the four merged requests (16 rows), then the lone one (4).
        # On a busy machine a request can miss the merge window, so ask only that some merged.
        calls = _metric(metrics, 'plaudit_model_batch_requests_count{model="judge"}')
        assert _metric(metrics, 'plaudit_model_batch_requests_sum{model="judge"}') == 5.0
        assert _metric(metrics, 'plaudit_model_batch_size_sum{model="judge"}') == 20.0
        assert 2.0 <= calls < 5.0, "concurrent requests shared model calls"


async def test_a_judge_that_cannot_load_is_not_ready_and_says_why(tmp_path: Path) -> None:
    missing = tmp_path / "missing.gguf"
    settings = Settings(data_dir=tmp_path, judge_model=str(missing), _env_file=None)  # type: ignore[call-arg]
    async with started_client(create_app(settings)) as client:
        error = assert_envelope(await wait_ready(client), 503)
        assert "judge (failed: ModelNotFoundError" in error["message"]
        assert "missing.gguf" in error["message"]
        scale = await client.post("/v1/judge/scale", json={"prompt": "q", "completions": ["a"]})
        assert "judge failed to load" in assert_envelope(scale, 503)["message"]
