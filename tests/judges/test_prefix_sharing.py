"""Shared-prefix choice scoring on the real SmolLM2: same log-probabilities as without it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from judges.backends.base import ChoiceRequest, ChoiceResult, system, user
from judges.templates import load_template

torch = pytest.importorskip("torch")

from judges.backends.batching import Row, pad_left, shared_prefix_length  # noqa: E402
from judges.backends.hf_runtime import HFRuntime  # noqa: E402

QUESTION = "What is the boiling point of water at sea level, and why does it change with altitude?"
ANSWERS = [
    "100 degrees Celsius.",
    "Water boils at 100 C at sea level; higher up the air pressure is lower, so it boils "
    "at a lower temperature.",
    "It depends on the kettle.",
    "About 212 F at sea level. Lower pressure at altitude lowers the boiling point, which is "
    "why pasta takes longer to cook in the mountains.",
]


@pytest.fixture(scope="module")
def shared(smollm2_dir: Path) -> HFRuntime:
    """Shared heads and KV copies only (the ordinary path); packed tails are ``packed``'s."""
    return HFRuntime.load(smollm2_dir, max_batch_size=4, prefix_min_tokens=16, pack_tails=False)


@pytest.fixture(scope="module")
def packed(shared: HFRuntime) -> HFRuntime:
    return HFRuntime(shared.model, shared.tokenizer, max_batch_size=4, prefix_min_tokens=16)


@pytest.fixture(scope="module")
def unshared(shared: HFRuntime) -> HFRuntime:
    return HFRuntime(shared.model, shared.tokenizer, max_batch_size=4, prefix_min_tokens=0)


@contextmanager
def forward_shapes(runtime: HFRuntime) -> Iterator[list[tuple[int, int]]]:
    """The ``input_ids`` shape of every forward pass made inside the block."""
    shapes: list[tuple[int, int]] = []

    def record(_module: Any, _args: Any, kwargs: dict[str, Any]) -> None:
        shapes.append(tuple(kwargs["input_ids"].shape))

    handle = runtime.model.register_forward_pre_hook(record, with_kwargs=True)
    try:
        yield shapes
    finally:
        handle.remove()


def assert_same_scores(shared_results: list[ChoiceResult], plain: list[ChoiceResult]) -> None:
    for fast, slow in zip(shared_results, plain, strict=True):
        assert fast.ok and slow.ok, (fast.error, slow.error)
        assert fast.logprobs == pytest.approx(slow.logprobs, abs=1e-3)


def pairwise_requests() -> list[ChoiceRequest]:
    template = load_template("pairwise@1")
    pairs = [(a, b) for i, a in enumerate(ANSWERS) for b in ANSWERS[i + 1 :]]
    return [
        template.render(question=QUESTION, response_a=a, response_b=b).choice_request()
        for first, second in pairs
        for a, b in ((first, second), (second, first))
    ]


@pytest.mark.slow
def test_pairwise_both_orders_match_unshared(shared: HFRuntime, unshared: HFRuntime) -> None:
    requests = pairwise_requests()  # 12 prompts of different lengths: 3 chunks of 4
    with forward_shapes(shared) as shapes:
        results = shared.score_choices(requests)
    assert_same_scores(results, unshared.score_choices(requests))
    longest = max(len(shared.encode_prompt(r.messages)) for r in requests)
    # the call's shared head runs once; every chunk then runs only its tails
    assert sum(batch == 1 for batch, _ in shapes) == 1
    assert [batch for batch, _ in shapes if batch > 1] == [4, 4, 4]
    assert all(width < longest / 2 for _, width in shapes[1:])


@pytest.mark.slow
def test_grade_scale_with_multi_token_candidates(shared: HFRuntime, unshared: HFRuntime) -> None:
    template = load_template("scale@1")
    requests = [
        template.render(question=QUESTION, response=answer, k=10).choice_request()
        for answer in ANSWERS
    ]
    assert requests[0].candidates[-1] == "10"
    assert_same_scores(shared.score_choices(requests), unshared.score_choices(requests))


@pytest.mark.slow
def test_rows_without_a_common_prefix_run_unshared(shared: HFRuntime, unshared: HFRuntime) -> None:
    requests = [
        ChoiceRequest([system("Answer briefly."), user("Is tea hot? A: yes, B: no.")], ["A", "B"]),
        ChoiceRequest([system("Think first."), user("Is ice cold? A: yes, B: no.")], ["A", "B"]),
    ]
    with forward_shapes(shared) as shapes:
        results = shared.score_choices(requests)
    assert len(shapes) == 1
    assert_same_scores(results, unshared.score_choices(requests))


@pytest.mark.slow
def test_chunks_with_different_heads_share_their_own(
    shared: HFRuntime, unshared: HFRuntime
) -> None:
    """Two groups with different system prompts: the call shares too little, each chunk more."""
    tail = " Reply with A or B." * 4
    fair = system("Fair: you judge short quizzes and answer with a single letter, A or B.")
    strict = system("Strict: you judge short quizzes and answer with a single letter, A or B.")
    requests = [
        ChoiceRequest([fair, user(f"{q}{tail}")], ["A", "B"])
        for q in ("A: 1, B: 2. Which?", "A: 3, B: 4. Which?")
    ] + [
        ChoiceRequest([strict, user(f"{q}{tail}{tail}")], ["A", "B"])
        for q in ("A: 5, B: 6. Which?", "A: 7, B: 8. Which?")
    ]
    runtime = HFRuntime(shared.model, shared.tokenizer, max_batch_size=2, pack_tails=False)
    with forward_shapes(runtime) as shapes:
        results = runtime.score_choices(requests)
    assert [batch for batch, _ in shapes] == [1, 2, 1, 2]
    assert_same_scores(results, unshared.score_choices(requests))


@pytest.mark.slow
def test_chunks_of_one_row(shared: HFRuntime, unshared: HFRuntime) -> None:
    requests = pairwise_requests()[:3]
    one = HFRuntime(shared.model, shared.tokenizer, max_batch_size=1, pack_tails=False)
    assert_same_scores(one.score_choices(requests), unshared.score_choices(requests))
    assert_same_scores(shared.score_choices(requests[:1]), unshared.score_choices(requests[:1]))


@pytest.mark.slow
def test_a_row_that_is_the_whole_shared_prefix(shared: HFRuntime, unshared: HFRuntime) -> None:
    """One prompt is the head of the others: every row still keeps a token of its own."""
    messages = [user(f"Question: {QUESTION} Is the answer '100 C' right? Reply yes or no.")]
    requests = [
        ChoiceRequest(messages, ["yes", "no"]),
        ChoiceRequest(messages, ["yes", "no"]),
        ChoiceRequest(messages, ["yes", "no"], assistant_prefix="My answer:"),
        ChoiceRequest(messages, ["1", "10"], assistant_prefix="Score:"),
    ]
    prompts = [shared.encode_prompt(r.messages, r.assistant_prefix) for r in requests]
    assert prompts[2][: len(prompts[0])] == prompts[0]
    assert_same_scores(shared.score_choices(requests), unshared.score_choices(requests))


def test_pad_left_after_a_shared_prefix() -> None:
    rows = [Row(0, [7, 8, 9, 1]), Row(1, [7, 8, 2, 3, 4])]
    assert shared_prefix_length(rows) == 2
    ids, mask, positions = pad_left(rows, 0, torch.device("cpu"), skip=2)
    assert ids.tolist() == [[0, 9, 1], [2, 3, 4]]
    assert mask.tolist() == [[1, 1, 0, 1, 1], [1, 1, 1, 1, 1]]
    assert positions[:, 1:].tolist() == [[2, 3], [3, 4]]
    assert pad_left(rows, 0, torch.device("cpu"))[2].tolist() == [[0, 0, 1, 2, 3], [0, 1, 2, 3, 4]]


def test_shared_prefix_leaves_every_row_a_token() -> None:
    assert shared_prefix_length([Row(0, [1, 2, 3]), Row(1, [1, 2, 3])]) == 2
    assert shared_prefix_length([Row(0, [1, 2]), Row(1, [1, 2, 3, 4])]) == 1
    assert shared_prefix_length([Row(0, [5])]) == 0
    assert shared_prefix_length([Row(0, [1, 2]), Row(1, [3, 2])]) == 0


def test_local_backend_rejects_a_negative_prefix_minimum() -> None:
    from judges.backends.local import LocalBackend

    with pytest.raises(ValueError, match="prefix_min_tokens"):
        LocalBackend(prefix_min_tokens=-1)


def test_sliding_window_and_recurrent_models_do_not_share() -> None:
    from types import SimpleNamespace

    from judges.backends.hf_runtime import _full_attention_only

    assert _full_attention_only(SimpleNamespace(sliding_window=None))
    assert _full_attention_only(SimpleNamespace(layer_types=["full_attention"] * 2))
    assert not _full_attention_only(SimpleNamespace(sliding_window=4096))
    assert not _full_attention_only(SimpleNamespace(layer_types=["full_attention", "mamba"]))


def test_prefix_groups_join_callers_on_one_question_and_split_different_ones() -> None:
    from judges.backends.batching import prefix_groups

    head = list(range(100, 140))  # template: 40 tokens
    q1, q2 = list(range(200, 230)), list(range(300, 330))  # two 30-token questions

    def caller(question: list[int], first_owner: int, n: int = 4) -> list[Row]:
        return [Row(first_owner + i, [*head, *question, 900 + i, 901]) for i in range(n)]

    same = prefix_groups([caller(q1, 0), caller(q1, 4)])
    assert [[r.owner for r in g] for g in same] == [list(range(8))]
    apart = prefix_groups([caller(q1, 0), caller(q2, 4), caller(q1, 8)])
    assert sorted(sorted(r.owner for r in g) for g in apart) == [
        [0, 1, 2, 3, 8, 9, 10, 11],
        [4, 5, 6, 7],
    ]
    # single rows have nothing of their own to share: they join whatever they meet
    singles = prefix_groups([caller(q1, 0, 1), caller(q2, 1, 1)])
    assert len(singles) == 1 and len(singles[0]) == 2


CRITERIA = [
    "States the boiling point at sea level.",
    "Explains why altitude changes the boiling point.",
    "Mentions air pressure.",
    "Gives the temperature in both Celsius and Fahrenheit.",
]


def rubric_requests() -> list[ChoiceRequest]:
    """Rubric rows as rubric scoring sends them: each answer against each criterion."""
    template = load_template("rubric_criterion@2")
    return [
        template.render(
            "0123456789abcdef", question=QUESTION, response=a, criterion=c
        ).choice_request()
        for a in ANSWERS
        for c in CRITERIA
    ]


@contextmanager
def decoder_passes(runtime: HFRuntime) -> Iterator[list[tuple[int, int]]]:
    """The ``input_ids`` shape of every pass through the decoder (packed or not)."""
    shapes: list[tuple[int, int]] = []

    def record(_module: Any, _args: Any, kwargs: dict[str, Any]) -> None:
        shapes.append(tuple(kwargs["input_ids"].shape))

    handle = runtime.model.get_decoder().register_forward_pre_hook(record, with_kwargs=True)
    try:
        yield shapes
    finally:
        handle.remove()


@pytest.mark.slow
def test_packed_rubric_rows_match_unshared_in_two_passes(
    packed: HFRuntime, unshared: HFRuntime
) -> None:
    requests = rubric_requests()  # 4 answers x 4 criteria: 4 families of 4 rows
    assert packed.pack_tails and not unshared.pack_tails
    with decoder_passes(packed) as shapes:
        results = packed.score_choices(requests)
    assert_same_scores(results, unshared.score_choices(requests))
    # the shared head once (a batch of one), then the four families in one packed pass
    assert [batch for batch, _ in shapes] == [1, 4]


@pytest.mark.slow
def test_pairs_pack_and_a_lone_row_takes_the_ordinary_path(
    packed: HFRuntime, unshared: HFRuntime
) -> None:
    # pairs sharing their response A pack; the lone rubric row has no family
    requests = [*pairwise_requests(), rubric_requests()[0]]
    with decoder_passes(packed) as shapes:
        results = packed.score_choices(requests)
    assert_same_scores(results, unshared.score_choices(requests))
    assert len(shapes) < len(requests)


@pytest.mark.slow
def test_a_later_call_with_the_same_head_reuses_its_cache(
    shared: HFRuntime, unshared: HFRuntime
) -> None:
    requests = pairwise_requests()
    runtime = HFRuntime(shared.model, shared.tokenizer, max_batch_size=4, pack_tails=False)
    first = runtime.score_choices(requests[:6])
    with forward_shapes(runtime) as shapes:
        second = runtime.score_choices(requests[6:])
    assert all(batch > 1 for batch, _ in shapes), "no head pass: it came from the first call"
    assert_same_scores([*first, *second], unshared.score_choices(requests))
