"""The openai judge backend against a real vLLM server (run by `make test-vllm`).

Skipped in the main suite (no server there); scripts/vllm_stage.sh starts vLLM on loopback and
sets PLAUDIT_TEST_VLLM_URL, and under that stage these tests must run.
"""

from __future__ import annotations

import math
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from judges.backends.base import ChoiceRequest, GenerateRequest, user
from judges.backends.openai_backend import OpenAIBackend, OpenAIConfig
from judges.limits import RedisLimiter
from services.app import create_app
from services.core.models.embedder import Embedder
from services.settings import Settings
from tests.conftest import REDIS_URL, require_services

URL = os.environ.get("PLAUDIT_TEST_VLLM_URL")
MODEL = os.environ.get("PLAUDIT_TEST_VLLM_MODEL", "smollm2-135m")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(URL is None, reason="no vLLM server (run `make test-vllm`)"),
]
QUESTION = [user("Which is better for 'What is 2 + 2?': A) 4 or B) 5? Reply with A or B.")]


@pytest.fixture
async def vllm() -> AsyncIterator[OpenAIBackend]:
    backend = OpenAIBackend(OpenAIConfig(str(URL), MODEL, timeout_s=120))
    yield backend
    await backend.aclose()


async def test_choice_logprobs_are_real(vllm: OpenAIBackend) -> None:
    [result] = await vllm.score_choices([ChoiceRequest(QUESTION, ["A", "B"])])
    assert result.ok, result.error
    assert result.coverage is not None, "scored from logprobs, not a parsed verdict"
    assert sum(result.probs) == pytest.approx(1.0)
    uniform = -math.log(49152)
    assert all(abs(lp - uniform) > 1e-3 for lp in result.logprobs), "embeddings were lost"


async def test_vllm_agrees_with_the_local_backend(vllm: OpenAIBackend, judge_backend: Any) -> None:
    [remote] = await vllm.score_choices([ChoiceRequest(QUESTION, ["A", "B"])])
    [local] = await judge_backend.score_choices([ChoiceRequest(QUESTION, ["A", "B"])])
    assert remote.logprobs[0] == pytest.approx(local.logprobs[0], abs=0.05)


async def test_generate(vllm: OpenAIBackend) -> None:
    [result] = await vllm.generate([GenerateRequest(QUESTION, max_new_tokens=8)])
    assert result.ok and result.text and result.finish_reason in ("stop", "length")


async def test_shared_redis_limiter_with_a_real_server() -> None:
    require_services()
    limiter = RedisLimiter(REDIS_URL, "vllm-stage", max_concurrency=1)
    backend = OpenAIBackend(OpenAIConfig(str(URL), MODEL, timeout_s=120), limiter=limiter)
    try:
        results = await backend.score_choices([ChoiceRequest(QUESTION, ["A", "B"])] * 3)
        assert all(r.ok for r in results)
    finally:
        await backend.aclose()
        await limiter.aclose()


async def test_judge_service_on_vllm(tmp_path: Path, embedder: Embedder) -> None:
    settings = Settings(  # type: ignore[call-arg]
        data_dir=tmp_path, judge_backend="openai", judge_base_url=URL
    )  # no judge_model: the backend asks the server which model it serves
    app = create_app(settings, embedder=embedder)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t", timeout=300) as c:
            body = {"prompt": "2 + 2?", "response_a": "4", "response_b": "5"}
            data = (await c.post("/v1/judge/pairwise", json=body)).json()
            assert data["status"] == "ok", data
            assert data["judge"]["backend"] == "openai-compatible"
            assert data["judge"]["model"] == MODEL
            group = {"prompt": "Name a colour.", "completions": ["red", "blue", "7", "green"]}
            rewards = (await c.post("/v1/judge/group", json=group)).json()["rewards"]
            assert all(r is not None for r in rewards)
