"""Concurrent calls to the local judge share forward passes (real SmolLM2-135M-Instruct).

The merged path must give what each call gives alone (within 1e-4 in log-probability),
keep each caller's shared-prefix reuse, isolate failures, and report and close cleanly.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from judges.backends.base import ChoiceRequest, ChoiceResult, GenerateRequest, user
from judges.model_worker import BatchRecord
from judges.templates import load_template

pytest.importorskip("torch")

from judges.backends.convert import ModelNotFoundError
from judges.backends.local import LocalBackend

pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="session")]

QUESTIONS = [
    "Why does ice float on liquid water, even though most solids sink in their own liquid?",
    "What causes the seasons on Earth, and why are they reversed between the hemispheres?",
]
ANSWERS = [
    "Ice is less dense than water.",
    "Hydrogen bonds hold ice in an open lattice, so it takes more room than the liquid.",
    "Because it is cold.",
    "Frozen water expands by about nine percent, which lowers its density below the liquid's.",
]


def scale_requests(question: str, answers: list[str]) -> list[ChoiceRequest]:
    template = load_template("scale@1")
    return [template.render(question=question, response=a, k=5).choice_request() for a in answers]


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def judge(smollm2_dir: Path) -> AsyncIterator[LocalBackend]:
    # The ordinary path's passes are counted here; packed tails: test_prefix_sharing.py.
    backend = LocalBackend(smollm2_dir, max_batch_size=8, batch_max_wait_s=0.02, pack_tails=False)
    await backend.start()
    yield backend
    await backend.aclose()


@contextmanager
def forward_shapes(backend: LocalBackend) -> Iterator[list[tuple[int, int]]]:
    """The ``input_ids`` shape of every forward pass the backend's model makes."""
    runtime = backend.worker.model
    assert runtime is not None
    shapes: list[tuple[int, int]] = []

    def record(_module: Any, _args: Any, kwargs: dict[str, Any]) -> None:
        shapes.append(tuple(kwargs["input_ids"].shape))

    handle = runtime.model.register_forward_pre_hook(record, with_kwargs=True)
    try:
        yield shapes
    finally:
        handle.remove()


def model_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("model-")}


def assert_close(merged: list[ChoiceResult], alone: list[ChoiceResult]) -> None:
    for a, b in zip(merged, alone, strict=True):
        assert a.ok and b.ok, (a.error, b.error)
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-4)


async def test_concurrent_groups_on_one_question_share_passes_and_its_prefix(
    judge: LocalBackend,
) -> None:
    groups = [scale_requests(QUESTIONS[0], ANSWERS[i:] + ANSWERS[:i]) for i in range(4)]
    with forward_shapes(judge) as alone_shapes:
        alone = [await judge.score_choices(group) for group in groups]
    records: list[BatchRecord] = []
    judge.worker.observers.append(records.append)
    try:
        with forward_shapes(judge) as merged_shapes:
            merged = await asyncio.gather(*(judge.score_choices(group) for group in groups))
    finally:
        judge.worker.observers.remove(records.append)
    assert [(r.kind, r.rows, r.requests) for r in records] == [("score", 16, 4)]
    for m, a in zip(merged, alone, strict=True):
        assert_close(m, a)
    # alone: the head once (later calls find it among the recent heads), then one pass of 4
    # per call; merged: the same head again from the recent ones, then two passes of 8 tails
    assert [batch for batch, _ in alone_shapes] == [1, 4, 4, 4, 4]
    assert [batch for batch, _ in merged_shapes] == [8, 8]
    head = alone_shapes[0][1]
    assert all(width < head for _, width in merged_shapes), "rows run only their tails"


async def test_groups_on_different_questions_are_kept_apart_by_prefix(
    judge: LocalBackend,
) -> None:
    groups = [scale_requests(q, ANSWERS) for q in QUESTIONS]
    alone = [await judge.score_choices(group) for group in groups]
    with forward_shapes(judge) as shapes:
        merged = await asyncio.gather(*(judge.score_choices(group) for group in groups))
    for m, a in zip(merged, alone, strict=True):
        assert_close(m, a)
    # the common head once, each question on top of it, then each group's four tails
    assert sorted(batch for batch, _ in shapes) == [1, 1, 1, 4, 4]


async def test_concurrent_generation_merges_and_matches_alone(judge: LocalBackend) -> None:
    prompts = ["What is 2+2?", "Name a colour.", "Say hello in French."]
    requests = [[GenerateRequest([user(p)], max_new_tokens=12)] for p in prompts]
    alone = [await judge.generate(r) for r in requests]
    before = judge.worker.stats.merged
    merged = await asyncio.gather(*(judge.generate(r) for r in requests))
    assert judge.worker.stats.merged == before + 1
    assert [m[0].text for m in merged] == [a[0].text for a in alone]
    assert all(m[0].ok for m in merged)


async def test_scoring_and_generation_arriving_together_run_as_two_kinds(
    judge: LocalBackend,
) -> None:
    records: list[BatchRecord] = []
    judge.worker.observers.append(records.append)
    try:
        scored, generated = await asyncio.gather(
            judge.score_choices(scale_requests(QUESTIONS[1], ANSWERS[:2])),
            judge.generate([GenerateRequest([user("Hi")], max_new_tokens=4)]),
        )
    finally:
        judge.worker.observers.remove(records.append)
    assert all(r.ok for r in scored) and generated[0].ok
    assert sorted((str(r.kind), r.rows) for r in records) == [("generate", 1), ("score", 2)]


async def test_a_row_that_breaks_fails_only_its_own_request(judge: LocalBackend) -> None:
    good = [GenerateRequest([user("What is 2+2?")], max_new_tokens=8)]
    bad = [GenerateRequest([user("Pick a name.")], max_new_tokens=8, temperature=1.0, seed=2**70)]
    [alone] = await judge.generate(good)
    before = judge.worker.stats.merged
    [ok], [broken] = await asyncio.gather(judge.generate(good), judge.generate(bad))
    assert judge.worker.stats.merged == before + 1, "the two calls shared a batch"
    assert broken.status == "error" and "Overflow" in (broken.error or "")
    assert ok.ok and ok.text == alone.text


async def test_a_failed_load_is_reported_with_its_reason(tmp_path: Path) -> None:
    missing = tmp_path / "missing.gguf"
    backend = LocalBackend(missing, cache_dir=tmp_path)
    assert backend.readiness.state == "idle"
    with pytest.raises(ModelNotFoundError):
        await backend.start()
    readiness = backend.readiness
    assert readiness.state == "failed" and not readiness.ready
    assert readiness.reason is not None and "missing.gguf" in readiness.reason
    [result] = await backend.score_choices(scale_requests(QUESTIONS[0], ANSWERS[:1]))
    assert result.status == "error" and "judge failed to load" in (result.error or "")
    await backend.aclose()


async def test_close_finishes_the_call_in_flight_then_refuses(smollm2_dir: Path) -> None:
    before = model_threads()
    backend = LocalBackend(smollm2_dir)
    await backend.start()
    assert model_threads() - before, "the model thread"
    in_flight = asyncio.create_task(backend.score_choices(scale_requests(QUESTIONS[0], ANSWERS)))
    while backend.worker.stats.batches == 0 and not in_flight.done():
        await asyncio.sleep(0.001)
    await backend.aclose()
    assert all(r.ok for r in await in_flight)
    assert backend.readiness.state == "closed"
    assert not model_threads() - before, "the model thread is gone"
    [after] = await backend.score_choices(scale_requests(QUESTIONS[0], ANSWERS[:1]))
    assert after.status == "error" and "closed" in (after.error or "")
