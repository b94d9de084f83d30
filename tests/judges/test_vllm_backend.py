"""The in-process vLLM backend.

Two parts:

* The plumbing (which rows go to the engine with which sampling settings, how outputs map
  back to items, error isolation, timeouts) on a toy engine with a character tokenizer.
  These run everywhere; they prove the bookkeeping, not the model.
* The real thing: vLLM on a CUDA GPU with the SmolLM2 checkpoint (converted once per
  session by the judges conftest, or ``PLAUDIT_TEST_VLLM_MODEL`` to use another HF
  directory; ``PLAUDIT_TEST_VLLM_DTYPE`` picks the dtype), compared against the
  transformers backend on the same weights. These skip cleanly when vllm is not
  importable or no CUDA GPU is present.
"""

from __future__ import annotations

import asyncio
import math
import os
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import pytest_asyncio

from judges.backends.base import (
    ChatMessage,
    ChoiceRequest,
    GenerateRequest,
    JudgeBackend,
    system,
    user,
)
from judges.backends.vllm_backend import VLLMBackend, VLLMRuntime

EOS = 3
AB = ("A", "B")
# vLLM's float32 support depends on its attention backend; half precision always works.
GPU_DTYPE = os.environ.get("PLAUDIT_TEST_VLLM_DTYPE", "float16")


def choice(text: str, candidates: Sequence[str] = AB, prefix: str = "") -> ChoiceRequest:
    return ChoiceRequest(messages=[user(text)], candidates=candidates, assistant_prefix=prefix)


# -- a toy engine ----------------------------------------------------------------------


class CharTokenizer:
    """One token per character; the chat template is ``<role>content...<assistant>``."""

    eos_token_id = EOS

    def apply_chat_template(
        self, messages: list[dict[str, str]], *, tokenize: bool, add_generation_prompt: bool
    ) -> str:
        assert not tokenize and add_generation_prompt
        return "".join(f"<{m['role']}>{m['content']}" for m in messages) + "<assistant>"

    def encode(self, text: str, add_special_tokens: bool) -> list[int]:
        assert not add_special_tokens
        return [ord(c) for c in text]


def toy_logprob(context: Sequence[int], token: int) -> float:
    """The toy model's log p(token | context)."""
    return -0.25 * ((token * 7 + len(context)) % 11 + 1)


@dataclass
class ToyParams:
    max_tokens: int
    temperature: float
    logprobs: int | None = None
    prompt_logprobs: int | None = None
    seed: int | None = None


class ToyLLM:
    """Answers rows like vLLM's async engine does, from :func:`toy_logprob`; ``peak`` is
    the most calls it had in flight at once."""

    model_config = SimpleNamespace(max_model_len=400)

    def __init__(self, delay_s: float = 0.0) -> None:
        self.calls: list[tuple[list[list[int]], list[ToyParams]]] = []
        self.delay_s = delay_s
        self.in_flight = self.peak = 0

    def get_tokenizer(self) -> CharTokenizer:
        return CharTokenizer()

    async def generate_rows(self, prompts: Sequence[Any], params: Sequence[Any]) -> list[Any]:
        ids = [p["prompt_token_ids"] for p in prompts]
        self.calls.append((ids, list(params)))
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            await asyncio.sleep(self.delay_s)
        finally:
            self.in_flight -= 1
        if any(ord("!") in row for row in ids):
            raise RuntimeError("engine fell over")
        return [self._answer(row, p) for row, p in zip(ids, params, strict=True)]

    def _answer(self, ids: list[int], params: ToyParams) -> Any:
        top: dict[int, Any] = {}
        if params.logprobs is not None:
            ranked = sorted(range(32, 127), key=lambda t: (-toy_logprob(ids, t), t))
            top = {
                t: SimpleNamespace(logprob=toy_logprob(ids, t)) for t in ranked[: params.logprobs]
            }
        prompt_logprobs = None
        if params.prompt_logprobs is not None:
            prompt_logprobs = [None] + [
                {ids[j]: SimpleNamespace(logprob=toy_logprob(ids[:j], ids[j]))}
                for j in range(1, len(ids))
            ]
        n = min(params.max_tokens, 5)
        completion = SimpleNamespace(
            text="y" * n,
            token_ids=[ord("y")] * n,
            finish_reason="length" if params.max_tokens <= 5 else "stop",
            logprobs=[top],
        )
        samples = [completion] * int(getattr(params, "n", 1))
        return SimpleNamespace(outputs=samples, prompt_logprobs=prompt_logprobs)


def toy_runtime(top_logprobs: int = 20, delay_s: float = 0.0) -> VLLMRuntime:
    return VLLMRuntime(ToyLLM(delay_s), ToyParams, top_logprobs=top_logprobs)


def prompt_ids(messages: Sequence[ChatMessage], prefix: str = "") -> list[int]:
    text = "".join(f"<{m['role']}>{m['content']}" for m in messages) + "<assistant>" + prefix
    return [ord(c) for c in text]


def expected_logprob(request: ChoiceRequest, tail: list[int]) -> float:
    ids = prompt_ids(request.messages, request.assistant_prefix) + tail
    start = len(ids) - len(tail)
    return sum(toy_logprob(ids[:j], ids[j]) for j in range(start, len(ids)))


# -- plumbing on the toy engine ------------------------------------------------------------


async def test_single_token_candidates_read_the_next_token_list() -> None:
    runtime = toy_runtime(top_logprobs=95)  # every printable character is listed
    request = choice("Pick one.", prefix="Verdict: ")
    [result] = await runtime.score_choices([request])
    assert result.ok
    expected = [expected_logprob(request, [ord(c)]) for c in AB]
    assert result.logprobs == pytest.approx(expected)
    [(rows, params)] = runtime.llm.calls
    assert rows == [prompt_ids(request.messages, "Verdict: ")]
    assert params[0] == ToyParams(max_tokens=1, temperature=0.0, logprobs=95)


async def test_a_candidate_outside_the_top_list_is_rescored_exactly() -> None:
    runtime = toy_runtime(top_logprobs=1)
    request = choice("Pick one.")
    [result] = await runtime.score_choices([request])
    assert result.ok
    assert result.logprobs == pytest.approx([expected_logprob(request, [ord(c)]) for c in AB])
    _, second = runtime.llm.calls
    assert second[1][0].prompt_logprobs == 1 and len(second[0]) == 2  # one row per candidate


async def test_multi_token_candidates_with_a_prefix_clash_end_with_eos() -> None:
    runtime = toy_runtime()
    grades = [str(i) for i in range(1, 11)]
    request = choice("Grade it.", grades)
    [result] = await runtime.score_choices([request])
    assert result.ok and len(result.probs) == 10
    assert math.isclose(sum(result.probs), 1.0)
    tails = [[ord(c) for c in g] + [EOS] for g in grades]
    assert result.logprobs == pytest.approx([expected_logprob(request, t) for t in tails])
    [(rows, _)] = runtime.llm.calls
    assert len(rows) == 10 and all(row[-1] == EOS for row in rows)


async def test_bad_items_and_a_failing_engine_call_stay_isolated() -> None:
    runtime = toy_runtime()
    results = await runtime.score_choices(
        [
            choice("x", []),
            choice("x", ["A", "A"]),
            ChoiceRequest([{"role": "robot", "content": "x"}], AB),  # type: ignore[typeddict-item]
            choice("word " * 100),
            choice("fine", ["yes", "no"]),
            choice("A or B?"),
        ]
    )
    assert [r.status for r in results] == ["invalid"] * 4 + ["ok", "ok"]
    assert "too long" in (results[3].error or "")
    # A failed engine call fails its own items only: "boom!" is scored by teacher forcing,
    # "A or B?" (every candidate listed) by the next-token call before it.
    listing_all = toy_runtime(top_logprobs=95)
    broken, fine = await listing_all.score_choices(
        [choice("boom!", ["yes", "no"]), choice("A or B?")]
    )
    assert broken.status == "error" and "fell over" in (broken.error or "")
    assert fine.ok


async def test_generate_sends_per_item_sampling_settings() -> None:
    runtime = toy_runtime()
    greedy, _, long, invalid = await runtime.generate(
        [
            GenerateRequest([user("hi")], max_new_tokens=3, seed=5),
            GenerateRequest([user("hi")], max_new_tokens=4, temperature=0.8, seed=5),
            GenerateRequest([user("hi")], max_new_tokens=64),
            GenerateRequest([user("hi")], max_new_tokens=0),
        ]
    )
    assert greedy.ok and greedy.text == "yyy" and greedy.num_tokens == 3
    assert greedy.finish_reason == "length" and long.finish_reason == "stop"
    assert invalid.status == "invalid"
    [(rows, params)] = runtime.llm.calls
    assert len(rows) == 3
    assert [p.seed for p in params] == [None, 5, None]  # a seed only matters when sampling
    assert [p.temperature for p in params] == [0.0, 0.8, 0.0]


@dataclass
class GuidedParams(ToyParams):
    top_p: float = 1.0
    n: int = 1
    stop: list[str] | None = None
    structured_outputs: Any = None


async def test_generate_sends_samples_stops_and_the_schema_as_guided_decoding() -> None:
    schema = {"type": "object", "properties": {"x": {"type": "integer"}}}
    runtime = VLLMRuntime(
        ToyLLM(), GuidedParams, structured=("structured_outputs", SimpleNamespace)
    )
    [result, plain] = await runtime.generate(
        [
            GenerateRequest(
                [user("hi")], 8, temperature=0.5, top_p=0.8, stop=["\n"], n=3, json_schema=schema
            ),
            GenerateRequest([user("hi")], 8),
        ]
    )
    assert result.ok and len(result.all_samples()) == 3 and len(plain.all_samples()) == 1
    [(_, [guided, free])] = runtime.llm.calls
    assert isinstance(guided, GuidedParams) and guided.structured_outputs.json == schema
    assert (guided.n, guided.top_p, guided.stop) == (3, 0.8, ["\n"])
    assert isinstance(free, GuidedParams) and free.structured_outputs is None
    without = VLLMRuntime(ToyLLM(), GuidedParams)  # a vLLM with no guided decoding
    [refused] = await without.generate([GenerateRequest([user("hi")], 8, json_schema=schema)])
    assert refused.status == "invalid" and "guided decoding" in (refused.error or "")


class ToyVLLMBackend(VLLMBackend):
    def __init__(self, delay_s: float = 0.0, **kwargs: Any) -> None:
        super().__init__("toy", **kwargs)
        self.delay_s = delay_s

    async def _load(self) -> VLLMRuntime:
        return toy_runtime(delay_s=self.delay_s)


async def test_concurrent_calls_run_in_the_engine_together() -> None:
    # Issue 19: on one thread, 8 concurrent calls went to the engine one after another.
    async with ToyVLLMBackend(delay_s=0.2) as backend:
        calls = [backend.score_choices([choice(f"A or B? {i}")]) for i in range(8)]
        results = await asyncio.gather(*calls)
        assert all(r.ok for [r] in results)
        assert backend._runtime is not None
        engine = backend._runtime.llm
        assert isinstance(engine, ToyLLM) and engine.peak == 8


async def test_the_engine_runs_off_the_event_loop_and_timeouts_mark_items() -> None:
    async with ToyVLLMBackend(delay_s=0.3) as backend:
        assert isinstance(backend, JudgeBackend) and backend.info.name == "vllm"
        ticks = 0

        async def heartbeat() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.01)

        beat = asyncio.create_task(heartbeat())
        [result] = await backend.score_choices([choice("A or B?")])
        beat.cancel()
        assert result.ok and ticks > 5
    async with ToyVLLMBackend(delay_s=0.5, timeout_s=0.05) as hurried:
        scored = await hurried.score_choices([choice("A or B?")])
        generated = await hurried.generate([GenerateRequest([user("hi")], max_new_tokens=2)])
    assert scored[0].status == "timeout" and generated[0].status == "timeout"


# -- the real vLLM on a GPU ----------------------------------------------------------------


@pytest.fixture(scope="module")
def vllm_model_dir(request: pytest.FixtureRequest) -> Path:
    """A HF directory for vLLM; skips unless vllm imports and a CUDA GPU is present."""
    pytest.importorskip("vllm")
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    override = os.environ.get("PLAUDIT_TEST_VLLM_MODEL")
    if override:
        return Path(override)
    path: Path = request.getfixturevalue("smollm2_dir")
    return path


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def gpu_backend(vllm_model_dir: Path) -> AsyncIterator[VLLMBackend]:
    backend = VLLMBackend(
        vllm_model_dir, dtype=GPU_DTYPE, gpu_memory_utilization=0.3, max_model_len=2048
    )
    await backend.start()
    yield backend
    await backend.aclose()


@pytest.mark.slow
async def test_gpu_choice_probabilities_are_normalized_and_prompt_dependent(
    gpu_backend: VLLMBackend,
) -> None:
    assert isinstance(gpu_backend, JudgeBackend)
    assert gpu_backend.info.name == "vllm" and gpu_backend.info.model_id
    first, second = await gpu_backend.score_choices(
        [
            choice("Is fire hot? Answer A for yes or B for no. Reply with one letter."),
            choice("Which letter comes second in the alphabet, A or B? Reply with one letter."),
        ]
    )
    for result in (first, second):
        assert result.ok, result.error
        assert math.isclose(sum(result.probs), 1.0, abs_tol=1e-9)
        assert all(lp < 0 for lp in result.logprobs)
        assert result.coverage is not None and 0.0 < result.coverage <= 1.0
    assert abs(first.probs[0] - second.probs[0]) > 1e-3


@pytest.mark.slow
async def test_gpu_scores_match_the_transformers_backend(
    gpu_backend: VLLMBackend, request: pytest.FixtureRequest
) -> None:
    if os.environ.get("PLAUDIT_TEST_VLLM_MODEL"):
        pytest.skip("the comparison uses the bundled SmolLM2 on both backends")
    pytest.importorskip("transformers")
    local = request.getfixturevalue("backend")  # the session's LocalBackend on SmolLM2
    requests = [
        choice("A or B?"),
        ChoiceRequest([system("You only answer B."), user("Pick one: A or B.")], AB),
        choice("Rate from 1 to 10.", [str(i) for i in range(1, 11)]),
        choice("Do you like tea? Reply yes or no.", ["yes", "no", "not really"]),
        choice("Pick a fruit.", ["A", "B", "banana"], prefix="Answer: "),
    ]
    on_gpu = await gpu_backend.score_choices(requests)
    on_cpu = await local.score_choices(requests)
    tolerance = 1e-2 if GPU_DTYPE == "float32" else 5e-2  # the CPU side runs in float32
    for gpu, cpu in zip(on_gpu, on_cpu, strict=True):
        assert gpu.ok and cpu.ok, (gpu.error, cpu.error)
        assert gpu.probs == pytest.approx(cpu.probs, abs=tolerance)
        assert gpu.best() == cpu.best() or max(cpu.probs) - sorted(cpu.probs)[-2] < tolerance


@pytest.mark.slow
async def test_gpu_bad_items_come_back_with_a_status(gpu_backend: VLLMBackend) -> None:
    results = await gpu_backend.score_choices(
        [choice("x", []), choice("word " * 3000), choice("A or B?")]
    )
    assert [r.status for r in results] == ["invalid", "invalid", "ok"]
    assert "too long" in (results[1].error or "")


@pytest.mark.slow
async def test_gpu_generate_stops_limits_and_reproduces_seeds(gpu_backend: VLLMBackend) -> None:
    seeded = GenerateRequest(
        [user("Invent a name for a cat.")], max_new_tokens=12, temperature=1.0, seed=7
    )
    answer, clipped, invalid, first, second = await gpu_backend.generate(
        [
            GenerateRequest([user("What is 2+2?")], max_new_tokens=24),
            GenerateRequest([user("Write a long story about a dragon.")], max_new_tokens=5),
            GenerateRequest([user("Hi")], max_new_tokens=0),
            seeded,
            seeded,
        ]
    )
    assert answer.ok and "4" in answer.text and answer.finish_reason == "stop"
    assert 0 < answer.num_tokens < 24 and "<|im_end|>" not in answer.text
    assert clipped.finish_reason == "length" and clipped.num_tokens == 5
    assert invalid.status == "invalid"
    [third] = await gpu_backend.generate([seeded])
    assert first.ok and first.text == second.text == third.text


@pytest.mark.slow
async def test_gpu_engine_work_does_not_block_the_event_loop(gpu_backend: VLLMBackend) -> None:
    ticks = 0

    async def heartbeat() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.005)

    beat = asyncio.create_task(heartbeat())
    await gpu_backend.generate(
        [GenerateRequest([user("Count from one to fifty.")], max_new_tokens=200)] * 8
    )
    beat.cancel()
    assert ticks > 2


@pytest.mark.slow
async def test_gpu_guided_decoding_gives_schema_valid_json(gpu_backend: VLLMBackend) -> None:
    from judges.generation import GenerationRequest, Sampling, generate
    from services.judge.structured import verdict_schema

    schema = verdict_schema(64)
    requests = [
        GenerationRequest(
            [user(q)], Sampling(max_new_tokens=64, temperature=0.8, seed=1), n=2, schema=schema
        )
        for q in ("Is A (4) or B (5) the sum of 2 and 2?", "Pick A or B.")
    ]
    results = await generate(gpu_backend.generate, requests)
    for result in results:
        assert result.ok and len(result.samples) == 2, result.error
        for sample in result.samples:
            assert sample.ok, (sample.text, sample.error)
            assert sample.value["verdict"] in ("A", "B", "tie")
