"""The blocking runtime under LocalBackend, checked against brute-force forward passes."""

from __future__ import annotations

from pathlib import Path

import pytest

from judges.backends.base import ChoiceRequest, ChoiceResult, user

torch = pytest.importorskip("torch")

from judges.backends.batching import Row, run_in_chunks  # noqa: E402
from judges.backends.hf_runtime import HFRuntime  # noqa: E402
from judges.backends.sequence_scoring import has_prefix_pair  # noqa: E402


@pytest.fixture(scope="module")
def runtime(smollm2_dir: Path) -> HFRuntime:
    return HFRuntime.load(smollm2_dir, max_batch_size=4)


def brute_force(runtime: HFRuntime, request: ChoiceRequest) -> list[float]:
    """Sum of token log-probabilities, one full forward pass per candidate."""
    prompt = runtime.encode_prompt(request.messages)
    targets = [runtime.encode_candidate(c) for c in request.candidates]
    if has_prefix_pair(targets):
        targets = [[*t, runtime.stop_ids[0]] for t in targets]
    scores = []
    with torch.inference_mode():
        for target in targets:
            logits = runtime.model(input_ids=torch.tensor([prompt + target])).logits[0]
            logprobs = torch.log_softmax(logits.float(), dim=-1)
            positions = range(len(prompt) - 1, len(prompt) - 1 + len(target))
            scores.append(
                sum(float(logprobs[p, t]) for p, t in zip(positions, target, strict=True))
            )
    return scores


@pytest.mark.slow
def test_cached_teacher_forcing_matches_full_forward_passes(runtime: HFRuntime) -> None:
    requests = [
        ChoiceRequest(
            [user("Rate it from 1 to 10." + " Please be careful." * 3)], ["1", "2", "10"]
        ),
        ChoiceRequest([user("Rate it from 1 to 10.")], ["3", "7", "10"]),
        ChoiceRequest([user("Do you like tea?")], ["yes", "no", "not really"]),
        ChoiceRequest([user("A or B?")], ["A", "B"]),
    ]
    results = runtime.score_choices(requests)
    for request, result in zip(requests, results, strict=True):
        assert result.ok, result.error
        for fast, slow in zip(result.logprobs, brute_force(runtime, request), strict=True):
            assert abs(fast - slow) < 1e-3


@pytest.mark.slow
def test_prefix_clash_scores_complete_answers(runtime: HFRuntime) -> None:
    """With "1" and "10" both offered, "1" is scored as "1" then end of turn."""
    [clash] = runtime.score_choices([ChoiceRequest([user("Pick a number.")], ["1", "10"])])
    [alone] = runtime.score_choices([ChoiceRequest([user("Pick a number.")], ["1", "2"])])
    assert clash.ok and alone.ok
    assert clash.logprobs[0] < alone.logprobs[0]  # P("1", end) < P("1" as first token)


def test_has_prefix_pair() -> None:
    assert has_prefix_pair([[1], [1, 0]])
    assert not has_prefix_pair([[1], [2], [3, 4]])
    assert not has_prefix_pair([[5, 6], [5, 7]])


def test_chunks_respect_count_and_weight() -> None:
    seen: list[list[int]] = []
    rows = [Row(i, [0] * (i + 1), weight=w) for i, w in enumerate([0, 0, 0, 10, 2, 2])]
    results: list[ChoiceResult | None] = [None] * len(rows)

    def run(chunk: list[Row]) -> None:
        seen.append([row.owner for row in chunk])

    run_in_chunks(rows, 4, run, results, ChoiceResult.failed, None)
    assert seen == [[0, 1, 2], [3], [4, 5]]


def test_a_failing_chunk_fails_only_its_items() -> None:
    rows = [Row(0, [1]), Row(1, [1, 2, 3, 4, 5])]
    results: list[ChoiceResult | None] = [None, None]

    def run(chunk: list[Row]) -> None:
        if chunk[0].owner == 1:
            raise RuntimeError("out of memory")
        results[0] = ChoiceResult.from_logprobs(["A"], [0.0])

    run_in_chunks(rows, 1, run, results, ChoiceResult.failed, None)
    assert [r.status if r else None for r in results] == ["ok", "error"]
    assert results[1] is not None and "out of memory" in (results[1].error or "")
