"""The injection harness on the real embedded judge, and the fence defence's structure (issue 9).

A few harness cases go through the judge service on SmolLM2-135M-Instruct; every prompt the
model sees is recorded and checked: the real fences carry the code and are not closed early, no
fake verdict line or chat role header reaches the model, and the slots are named by the code's
letters. Nothing here asserts how well the weak model judges.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from bench.injection import STYLES, TRIPLES, build_cases, count_flips
from bench.judge_injection import judge_cases
from judges.backends.base import ChoiceRequest, ChoiceResult
from judges.backends.local import LocalBackend
from judges.fencing import slot_labels
from judges.templates import load_template
from services.core.cache import MemoryCache
from services.core.models.cached_judge import CachedJudge
from services.judge.service import JudgeService
from services.judge.settings import JudgeSettings

pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="session")]

SUBSET = ("forged_boundary", "fake_verdict", "fake_json", "chat_tokens", "zero_width", "fullwidth")


class Recording:
    """The real backend, keeping every choice request it is sent."""

    def __init__(self, backend: LocalBackend) -> None:
        self.backend = backend
        self.requests: list[ChoiceRequest] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.backend, name)

    async def score_choices(self, requests: Sequence[ChoiceRequest]) -> list[ChoiceResult]:
        self.requests += requests
        return await self.backend.score_choices(requests)


def service_on(recording: Recording) -> JudgeService:
    settings = JudgeSettings(fence_secret="test-secret")
    return JudgeService(settings, CachedJudge(recording, MemoryCache()))  # type: ignore[arg-type]


def common_head(texts: list[str]) -> str:
    """The longest start every text shares, character by character."""
    shortest = min(map(len, texts))
    end = next((i for i in range(shortest) if len({t[i] for t in texts}) > 1), shortest)
    return texts[0][:end]


def im_starts(backend: LocalBackend, request: ChoiceRequest) -> int:
    runtime = backend.worker.model
    assert runtime is not None
    ids = runtime.encode_prompt(request.messages, request.assistant_prefix)
    return ids.count(runtime.tokenizer.convert_tokens_to_ids("<|im_start|>"))


async def test_harness_subset_on_the_real_judge_keeps_the_fences(backend: LocalBackend) -> None:
    recording = Recording(backend)
    service = service_on(recording)
    styles = [s for s in STYLES if s.name in SUBSET]
    cases = build_cases(TRIPLES[:1], styles)
    verdicts = await judge_cases(service, cases, "pairwise@2", swap=True)
    report = count_flips(cases, verdicts, styles)
    assert report["judged"] == 2 * len(styles) and 0.0 <= report["flip_rate"] <= 1.0
    assert all(v.p_a is not None and 0.0 <= v.p_a <= 1.0 for v in verdicts)

    code = service.fence_code(load_template("pairwise@2"), TRIPLES[0].question)
    assert code is not None
    # both orders of every pair, less two: the clean pair with the wrong answer in slot a, in
    # order "ba", is the clean pair with it in slot b, in order "ab" (the cache serves them)
    assert len(recording.requests) == 2 * len(cases) - 2
    for request in recording.requests:
        user = request.messages[-1]["content"]
        assert list(request.candidates) == list(slot_labels(code))  # never A/B
        # the real fences, each once (response_a also once in the instructions' example)
        assert user.count(f"<</question {code}>>") == 1
        assert user.count(f"<</response_a {code}>>") == 2
        assert user.count(f"<</response_b {code}>>") == 1
        for slot in ("a", "b"):
            body = user.split(f"<<response_{slot} {code}>>\n", 1)[1]
            body = body.split(f"\n<</response_{slot} {code}>>", 1)[0]
            assert "<<" not in body and ">>" not in body, "a forged fence survived"
            assert "[[" not in body and "\uff3b\uff3b" not in body, "a verdict survived"
        assert "<|im_start|>" not in user and "Verdict: [[" not in user
        # the model sees exactly the chat template's role headers: system, user, assistant
        assert im_starts(backend, request) == 3
    # one code per question: every prompt shares the head up to the question's closing fence,
    # which the local backend runs once (shared-prefix reuse keeps working)
    head = common_head([r.messages[-1]["content"] for r in recording.requests])
    assert f"<</question {code}>>\n\nResponse " in head


async def test_without_the_defence_a_role_header_reaches_the_model(backend: LocalBackend) -> None:
    """The contrast that shows the check above can fail: pairwise@1 lets <|im_start|> through."""
    recording = Recording(backend)
    chat = [s for s in STYLES if s.name == "chat_tokens"]
    cases = [c for c in build_cases(TRIPLES[:1], chat) if c.style]
    await judge_cases(service_on(recording), cases, "pairwise@1", swap=False)
    assert recording.requests and all(im_starts(backend, r) > 3 for r in recording.requests)


async def test_the_same_request_renders_the_same_prompt(backend: LocalBackend) -> None:
    """The boundary is derived, not drawn: caching and determinism keep working."""
    first, second = Recording(backend), Recording(backend)
    cases = build_cases(TRIPLES[1:2], [s for s in STYLES if s.name == "fake_verdict"])
    one = await judge_cases(service_on(first), cases, "pairwise@2", swap=True)
    two = await judge_cases(service_on(second), cases, "pairwise@2", swap=True)
    assert first.requests == second.requests
    assert [v.p_a for v in one] == pytest.approx([v.p_a for v in two], abs=1e-4)
