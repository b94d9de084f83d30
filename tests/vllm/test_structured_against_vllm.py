"""Structured generation against a real vLLM server (guided decoding), run by the vLLM stage.

vLLM enforces ``response_format: {"type": "json_schema"}`` with its guided decoding, so every
sample must validate; the judge's generate mode must then give a verdict on every order.
Skipped in the main suite (no server there); scripts/vllm_stage.sh sets PLAUDIT_TEST_VLLM_URL.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Literal

import httpx
import pytest
from pydantic import BaseModel, ConfigDict, Field

from judges.backends.base import system, user
from judges.backends.openai_backend import OpenAIBackend, OpenAIConfig
from judges.generation import GenerationRequest, Sampling, generate
from services.app import create_app
from services.core.models.embedder import Embedder
from services.settings import Settings

URL = os.environ.get("PLAUDIT_TEST_VLLM_URL")
MODEL = os.environ.get("PLAUDIT_TEST_VLLM_MODEL", "smollm2-135m")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(URL is None, reason="no vLLM server (run `make test-vllm`)"),
]


class Review(BaseModel):
    model_config = ConfigDict(extra="forbid")
    summary: str = Field(max_length=60)
    stars: int = Field(ge=1, le=5)
    verdict: Literal["buy", "skip"]


@pytest.fixture
async def vllm() -> AsyncIterator[OpenAIBackend]:
    backend = OpenAIBackend(OpenAIConfig(str(URL), MODEL, timeout_s=120))
    yield backend
    await backend.aclose()


async def test_guided_decoding_returns_schema_valid_objects(vllm: OpenAIBackend) -> None:
    head = system("You write short product reviews as JSON.")
    requests = [
        GenerationRequest(
            [head, user(q)],
            Sampling(max_new_tokens=64, temperature=0.8, seed=5),
            n=2,
            schema=Review,
        )
        for q in ("Review a cheap umbrella that broke.", "Review a good bakery.")
    ]
    results = await generate(vllm.generate, requests)
    for result in results:
        assert result.ok and len(result.samples) == 2, result.error
        for sample in result.samples:
            assert sample.ok, (sample.text, sample.error)
            assert isinstance(sample.value, Review)


async def test_judge_generate_mode_yields_a_verdict_on_every_order(
    tmp_path: Path, embedder: Embedder
) -> None:
    settings = Settings(  # type: ignore[call-arg]
        data_dir=tmp_path, judge_backend="openai", judge_base_url=URL
    )
    app = create_app(settings, embedder=embedder)
    pairs = [("2 + 2?", "4", "5"), ("Capital of France?", "Lyon.", "Paris."), ("Hi", "Hello!", "?")]
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t", timeout=300) as c:
            for question, a, b in pairs:
                body = {
                    "prompt": question,
                    "response_a": a,
                    "response_b": b,
                    "mode": "generate",
                    "max_new_tokens": 64,
                    "verdict_fallback": "none",
                }
                data = (await c.post("/v1/judge/pairwise", json=body)).json()
                assert data["judge"]["template"] == "pairwise_json@2", data
                for order in data["orders"]:
                    assert order["status"] == "ok", order
                    assert order["verdict_source"] == "structured"
