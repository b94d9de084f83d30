"""The transformers backend on the real SmolLM2-135M-Instruct (converted once per session)."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

import pytest

from judges.backends.base import (
    ChoiceRequest,
    GenerateRequest,
    JudgeBackend,
    system,
    user,
)
from judges.parsing import parse_pairwise_verdict
from judges.templates import load_template

pytest.importorskip("torch")

from judges.backends import convert
from judges.backends.local import LocalBackend

pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="session")]

AB = ["A", "B"]


def choice(text: str, candidates: list[str] = AB) -> ChoiceRequest:
    return ChoiceRequest(messages=[user(text)], candidates=candidates)


# -- loading -----------------------------------------------------------------------


async def test_new_backend_starts_from_the_cache(
    smollm2_dir: Path, model_cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        convert, "write_checkpoint_from_gguf", lambda *a: pytest.fail("reconverted")
    )
    async with LocalBackend(cache_dir=model_cache_dir) as fresh:
        assert fresh.model_dir == smollm2_dir
        [result] = await fresh.score_choices([choice("Reply with A or B.")])
    assert result.ok


# -- choice scoring --------------------------------------------------------------------


async def test_backend_satisfies_the_protocol(backend: LocalBackend) -> None:
    assert isinstance(backend, JudgeBackend)
    assert backend.info.name == "local-transformers"
    assert backend.info.model_id.startswith("SmolLM2-135M-Instruct")


async def test_choice_probabilities_are_normalized_and_prompt_dependent(
    backend: LocalBackend,
) -> None:
    first, second = await backend.score_choices(
        [
            choice("Is fire hot? Answer A for yes or B for no. Reply with one letter."),
            choice("Which letter comes second in the alphabet, A or B? Reply with one letter."),
        ]
    )
    for result in (first, second):
        assert result.ok, result.error
        assert result.candidates == ("A", "B")
        assert math.isclose(sum(result.probs), 1.0, abs_tol=1e-9)
        assert all(0.0 < p < 1.0 for p in result.probs)
        assert all(lp < 0 for lp in result.logprobs)
        assert result.coverage is not None and 0.0 < result.coverage <= 1.0
        assert result.best() in AB
    assert abs(first.probs[0] - second.probs[0]) > 1e-3


async def test_padded_batch_matches_one_by_one(backend: LocalBackend) -> None:
    requests = [
        choice("A or B?"),
        ChoiceRequest(messages=[], candidates=AB),  # invalid, in the middle of the batch
        choice("Please consider the following long question carefully. " * 8 + "A or B?"),
        ChoiceRequest([system("You only answer B."), user("Pick one: A or B.")], AB),
        choice("Rate from 1 to 10.", [str(i) for i in range(1, 11)]),
        choice("Medium length prompt, which needs some padding in a batch. A or B?"),
    ]
    batched = await backend.score_choices(requests)
    assert [r.status for r in batched] == ["ok", "invalid", "ok", "ok", "ok", "ok"]
    for request, together in zip(requests, batched, strict=True):
        [alone] = await backend.score_choices([request])
        assert alone.status == together.status
        for a, b in zip(alone.logprobs, together.logprobs, strict=True):
            assert abs(a - b) < 1e-3


async def test_multi_token_candidates_use_teacher_forcing(backend: LocalBackend) -> None:
    prompt = "Do you like tea? Reply yes or no."
    single, multi = await backend.score_choices(
        [choice(prompt, ["yes", "no"]), choice(prompt, ["yes", "no", "not really"])]
    )
    assert single.ok and multi.ok
    # Without a prefix clash the teacher-forced score of a one-token candidate is the
    # same next-token log-probability the fast path reads.
    assert abs(single.logprobs[0] - multi.logprobs[0]) < 1e-3
    assert math.isclose(sum(multi.probs), 1.0, abs_tol=1e-9)


async def test_grades_with_a_prefix_clash_are_scored_as_complete_answers(
    backend: LocalBackend,
) -> None:
    prompt = load_template("scale@1").render(question="What is 2+2?", response="4", k=10)
    [result] = await backend.score_choices([prompt.choice_request()])
    assert result.ok, result.error
    assert len(result.probs) == 10
    assert math.isclose(sum(result.probs), 1.0, abs_tol=1e-9)


async def test_bad_items_come_back_with_a_status(backend: LocalBackend) -> None:
    results = await backend.score_choices(
        [
            choice("x", []),
            choice("x", ["A", "A"]),
            ChoiceRequest([{"role": "robot", "content": "x"}], AB),  # type: ignore[typeddict-item]
            choice("word " * 3000),
            choice("A or B?"),
        ]
    )
    assert [r.status for r in results] == ["invalid"] * 4 + ["ok"]
    assert all(r.error for r in results[:4])
    assert "too long" in (results[3].error or "")


async def test_swapped_pairwise_template_round_trip(backend: LocalBackend) -> None:
    template = load_template("pairwise@1")
    good, bad = "Paris is the capital of France.", "The capital of France is Berlin."
    forward = template.render(question="Capital of France?", response_a=good, response_b=bad)
    swapped = template.render(question="Capital of France?", response_a=bad, response_b=good)
    results = await backend.score_choices([forward.choice_request(), swapped.choice_request()])
    assert all(r.ok for r in results)
    assert results[0].probs != results[1].probs


async def test_timeout_marks_items_instead_of_raising(smollm2_dir: Path) -> None:
    async with LocalBackend(smollm2_dir, timeout_s=0.0) as hurried:
        scored = await hurried.score_choices([choice("A or B?")])
        generated = await hurried.generate([GenerateRequest([user("Hi")], max_new_tokens=4)])
    assert scored[0].status == "timeout" and generated[0].status == "timeout"


# -- generation ------------------------------------------------------------------------


async def test_generate_returns_text(backend: LocalBackend) -> None:
    [result] = await backend.generate([GenerateRequest([user("What is 2+2?")], max_new_tokens=24)])
    assert result.ok, result.error
    assert "4" in result.text
    assert result.finish_reason == "stop"
    assert 0 < result.num_tokens < 24
    assert "<|im_end|>" not in result.text


async def test_generate_batch_with_padding_and_limits(backend: LocalBackend) -> None:
    requests = [
        GenerateRequest([user("What is 2+2?")], max_new_tokens=16),
        GenerateRequest(
            [user("Write a long story about a dragon who learns to cook. " * 3)], max_new_tokens=5
        ),
        GenerateRequest([user("Hi")], max_new_tokens=0),
        GenerateRequest([user("Name a colour.")], max_new_tokens=12),
    ]
    batched = await backend.generate(requests)
    assert [r.status for r in batched] == ["ok", "ok", "invalid", "ok"]
    assert batched[1].finish_reason == "length" and batched[1].num_tokens == 5
    for request, together in zip(requests, batched, strict=True):
        if together.ok:
            [alone] = await backend.generate([request])
            assert alone.text == together.text  # greedy decoding is batch-invariant


async def test_seeded_sampling_is_reproducible(backend: LocalBackend) -> None:
    request = GenerateRequest(
        [user("Invent a name for a cat.")], max_new_tokens=12, temperature=1.0, seed=7
    )
    first, second = await backend.generate([request, request])
    [third] = await backend.generate([request])
    assert first.ok and first.text == second.text == third.text


async def test_pairwise_generate_reply_parses_without_raising(backend: LocalBackend) -> None:
    prompt = load_template("pairwise_generate@1").render(
        question="2+2?", response_a="4", response_b="5"
    )
    [result] = await backend.generate([prompt.generate_request(max_new_tokens=48)])
    assert result.ok
    assert parse_pairwise_verdict(result.text).status in ("ok", "unparseable")


async def test_model_work_does_not_block_the_event_loop(backend: LocalBackend) -> None:
    ticks = 0
    stop = asyncio.Event()

    async def heartbeat() -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            await asyncio.sleep(0.01)

    beat = asyncio.create_task(heartbeat())
    await backend.generate(
        [GenerateRequest([user("Count from one to twenty.")], max_new_tokens=40)]
    )
    stop.set()
    await beat
    assert ticks > 5


async def test_concurrent_calls_are_served_one_batch_at_a_time(backend: LocalBackend) -> None:
    calls = [backend.score_choices([choice(f"Question {i}: A or B?")]) for i in range(3)]
    scored, generated = await asyncio.gather(
        asyncio.gather(*calls), backend.generate([GenerateRequest([user("Hi")], 4)])
    )
    assert all(r.ok for batch in scored for r in batch)
    assert generated[0].ok


async def test_constructor_rejects_bad_settings() -> None:
    with pytest.raises(ValueError):
        LocalBackend(dtype="int3")
    with pytest.raises(ValueError):
        LocalBackend(max_batch_size=0)
    with pytest.raises(ValueError):
        LocalBackend(num_threads=0)
