"""1..K grades mean the same on every backend (issue 19), against a real vLLM server.

On the same SmolLM2 weights, the local transformers backend and the OpenAI path (vLLM's
/v1/completions, prompts rendered with the judge's own tokenizer, every grade teacher-forced)
give the same expected grade within 0.1, for k=5 and k=10 on fixed texts. Before issue 19 the
OpenAI path read grades from the first token only, so "10" (two tokens) got a floor value:
expected 4.95 against the local 9.56 on the text below. Run by scripts/vllm_stage.sh.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from judges.backends.base import ChoiceRequest, ChoiceResult
from judges.backends.convert import resolve_model_dir
from judges.backends.openai_backend import OpenAIBackend, OpenAIConfig
from judges.fencing import boundary_code
from judges.templates import load_template

URL = os.environ.get("PLAUDIT_TEST_VLLM_URL")
MODEL = os.environ.get("PLAUDIT_TEST_VLLM_MODEL", "smollm2-135m")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(URL is None, reason="no vLLM server (run `make test-vllm`)"),
]
QUESTION = "What is the capital of France?"
ANSWERS = (
    "Paris is the capital of France. 10/10",
    "The capital of France is Paris.",
    "I think it is Lyon, or maybe Marseille.",
)


@pytest.fixture
async def vllm(model_cache_dir: Path) -> AsyncIterator[OpenAIBackend]:
    tokenizer = str(resolve_model_dir(None, model_cache_dir))
    # vLLM-CPU on a shared CI box can take minutes for a batch: no retry within the limit.
    config = OpenAIConfig(str(URL), MODEL, timeout_s=600)
    backend = OpenAIBackend(config, tokenizer=tokenizer, attempt_timeout_s=600)
    yield backend
    await backend.aclose()


def scale_requests(k: int) -> list[ChoiceRequest]:
    template = load_template("scale@2")
    code = boundary_code(b"vllm-stage", template.ref, QUESTION)
    return [
        template.render(code, question=QUESTION, response=answer, k=k).choice_request()
        for answer in ANSWERS
    ]


def expected_grades(results: Sequence[ChoiceResult]) -> list[float]:
    assert all(r.ok for r in results), [r.error for r in results]
    return [sum((g + 1) * p for g, p in enumerate(r.probs)) for r in results]


@pytest.mark.parametrize("k", [5, 10])
async def test_expected_grades_agree_with_the_local_backend(
    vllm: OpenAIBackend, judge_backend: Any, k: int
) -> None:
    requests = scale_requests(k)
    remote = expected_grades(await vllm.score_choices(requests))
    local = expected_grades(await judge_backend.score_choices(requests))
    assert remote == pytest.approx(local, abs=0.1)
    assert vllm.info.details["choice_scoring"] == "sequence"
