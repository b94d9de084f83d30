"""Seeing a run (issue 10): an access line per request (never texts) and Prometheus metrics
per run and channel, read from a live app's /metrics.

The scripted judge prefers "GOOD" (and the GOOD answers here are the longer ones, so the
reward correlates with length); diversity runs on the real MiniLM.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI

from services.app import create_app
from services.core.models.embedder import Embedder
from services.rewards.run_metrics import Moments
from services.settings import Settings
from tests.services.judge.scripted import ScriptedBackend

SPEC = {"channels": {"judge_pairwise": {}, "judge_scale": {"k": 5}, "diversity": {}}}
SECRET = "GOOD and long secret answer text"
GROUPS = [
    ["GOOD a long and careful answer", "no", SECRET, "nah"],
    ["GOOD a fairly long reply here", "x", "GOOD another long one", "ok"],
]


def test_moments() -> None:
    m = Moments()
    for x, y in [(1, 2), (2, 4), (3, 6)]:
        m.add(x, y)
    assert m.mean == 2 and m.std == pytest.approx(math.sqrt(2 / 3))
    assert m.correlation == pytest.approx(1.0)
    flat = Moments()
    flat.add(1, 1)
    flat.add(1, 2)
    assert math.isnan(flat.correlation), "no spread in x: undefined, not 0"


@pytest.fixture
async def client(
    embedded_settings: Settings, embedder: Embedder
) -> AsyncIterator[httpx.AsyncClient]:
    app: FastAPI = create_app(embedded_settings, embedder=embedder, judge_backend=ScriptedBackend())
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            yield c


def _metric(text: str, name: str, **labels: str) -> float:
    for line in text.splitlines():
        if not line.startswith(name + "{"):
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', line.split("}")[0]))
        if all(found.get(k) == v for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no {name} {labels} in /metrics")


async def test_a_run_is_seen_in_the_access_log_and_the_metrics(
    client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="plaudit.access")
    for step, completions in enumerate(GROUPS, start=1):
        body = {"prompt": "Say something.", "completions": completions, "spec": SPEC}
        response = await client.post(
            "/v1/rewards/group", json={**body, "run_id": "team/run 1", "step": step}
        )
        assert response.status_code == 200, response.text
    lines = [r.getMessage() for r in caplog.records if r.name == "plaudit.access"]
    scored = [line for line in lines if line.startswith("POST /v1/rewards/group 200 ")]
    assert len(scored) == 2
    assert scored[0].endswith(
        "run=team/run_1 step=1 group=4 channels=diversity,judge_pairwise,judge_scale"
    ), scored[0]
    assert all(SECRET not in line and "GOOD" not in line for line in lines), "never texts"

    text = (await client.get("/metrics")).text
    run = "team/run 1"
    assert _metric(text, "plaudit_run_groups_total", run=run) == 2
    scale = _metric(text, "plaudit_run_channel_mean", run=run, channel="judge_scale")
    assert 1.0 <= scale <= 5.0
    assert _metric(text, "plaudit_run_channel_std", run=run, channel="judge_scale") > 0
    assert _metric(text, "plaudit_run_length_correlation", run=run) > 0.5, "GOOD = longer"
    assert 0.0 <= _metric(text, "plaudit_run_judge_tie_rate", run=run) <= 1.0
    assert 0.0 <= _metric(text, "plaudit_run_judge_consistency", run=run) <= 1.0
