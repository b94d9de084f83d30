"""Grades of more than one token over the OpenAI-compatible path (issue 19).

A 1..K grade read from the first token cannot see "10" (``1``, ``0`` for SmolLM2), so it got
a floor value and "1" took its probability. With the judge's tokenizer known, every candidate
is teacher-forced through ``/v1/completions`` (token-id prompts, echoed logprobs). The stand-in
server (tests/judges/openai_standin.py) answers from a ``(previous, token) -> logprob`` table
that each test sets, so the expected sums are computed here from the real SmolLM2 tokenizer.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from judges.backends.base import ChatMessage, ChoiceRequest, user
from judges.backends.openai_backend import OpenAIBackend, OpenAIConfig
from judges.backends.sequence_scoring import ChatTokenizer
from tests.judges.openai_standin import MODEL, UNLISTED_PAIR_LOGPROB, Run, StandIn, stand_in_server

GRADES = tuple(str(g) for g in range(1, 11))
PROMPT = [user("Grade this from 1 to 10. Reply with the number only.")]


@pytest.fixture(scope="module")
def stand_in() -> Iterator[StandIn]:
    with stand_in_server() as server:
        yield server


@pytest.fixture(scope="module")
def tokenizer(smollm2_dir: Path) -> ChatTokenizer:
    return ChatTokenizer.load(str(smollm2_dir))


def new_run(server: StandIn) -> tuple[str, Run]:
    run_id = uuid.uuid4().hex[:12]
    run = server.runs.setdefault(run_id, Run())
    return run_id, run


def backend(
    server: StandIn, behaviour: str, run_id: str, tokenizer: ChatTokenizer | None
) -> OpenAIBackend:
    if tokenizer is not None:  # vLLM tokenizes the text prompts with the same tokenizer
        server.runs[run_id].tokenize = tokenizer.encode
    return OpenAIBackend(OpenAIConfig(server.url(behaviour, run_id), MODEL), tokenizer=tokenizer)


def favour_ten(run: Run, tokenizer: ChatTokenizer) -> dict[str, float]:
    """A judge that means "10": "1" is its likely first token, then "0", then the end.
    Returns each grade's expected summed logprob under the table."""
    last = tokenizer.prompt_ids(PROMPT)[-1]
    one, zero = tokenizer.candidate_ids("1")[0], tokenizer.candidate_ids("0")[0]
    end = tokenizer.end_id
    run.pair_logprobs.update(
        {(last, one): -0.1, (one, zero): -0.05, (zero, end): -0.01, (one, end): -4.0}
    )
    expected = {}
    for grade in GRADES:
        ids = [last, *tokenizer.candidate_ids(grade), end]
        expected[grade] = sum(
            run.pair_logprobs.get(pair, UNLISTED_PAIR_LOGPROB) for pair in itertools.pairwise(ids)
        )
    return expected


def test_ten_is_two_tokens_for_smollm2(tokenizer: ChatTokenizer) -> None:
    assert len(tokenizer.candidate_ids("10")) == 2  # why first-token reading fails


async def test_two_token_grades_are_teacher_forced(
    stand_in: StandIn, tokenizer: ChatTokenizer
) -> None:
    run_id, run = new_run(stand_in)
    expected = favour_ten(run, tokenizer)
    requests = [ChoiceRequest(PROMPT, GRADES)] * 3
    async with backend(stand_in, "proper", run_id, tokenizer) as judge:
        assert judge.info.details["choice_scoring"] == "sequence"
        results = await judge.score_choices(requests)
    for result in results:
        assert result.ok and result.best() == "10"
        assert result.logprobs == pytest.approx([expected[g] for g in GRADES])
        assert result.coverage is not None  # scored, not a parsed verdict
    [call] = run.completions  # every row of every request in one call
    assert len(call["prompt"]) == 30 and call["echo"] is True and run.bodies == []
    prompt = tokenizer.prompt_ids(PROMPT)
    assert call["prompt"][9] == [*prompt, *tokenizer.candidate_ids("10"), tokenizer.end_id]


async def test_first_token_reading_cannot_see_ten(stand_in: StandIn) -> None:
    # Without the tokenizer (or before issue 19) the same judge reads as "1".
    run_id, _ = new_run(stand_in)
    async with backend(stand_in, "proper", run_id, None) as judge:
        assert judge.info.details["choice_scoring"] == "first_token"
        [result] = await judge.score_choices(
            [ChoiceRequest([user("whole number from 1 to 10")], GRADES)]
        )
    assert result.ok and result.best() != "10"


def letters(run: Run, tokenizer: ChatTokenizer, prompt: list[ChatMessage]) -> dict[str, int]:
    """Let the stand-in list next tokens by their text: A is likelier than B after
    ``prompt``; returns each letter's id."""
    ids = {x: tokenizer.candidate_ids(x)[0] for x in "ABC"}
    run.token_text.update({i: x for x, i in ids.items()})
    last = tokenizer.prompt_ids(prompt)[-1]
    run.pair_logprobs.update({(last, ids["A"]): -0.3, (last, ids["B"]): -1.5})
    return ids


async def test_single_token_candidates_are_read_from_one_batched_call(
    stand_in: StandIn, tokenizer: ChatTokenizer
) -> None:
    run_id, run = new_run(stand_in)
    letters(run, tokenizer, [user("pick A")])
    requests = [ChoiceRequest([user("pick A")], ["A", "B"])] * 56  # a G=8 round robin's orders
    async with backend(stand_in, "proper", run_id, tokenizer) as judge:
        results = await judge.score_choices(requests)
    assert all(r.ok and r.logprobs == pytest.approx((-0.3, -1.5)) for r in results)
    [call] = run.completions  # was 56 chat calls
    assert len(call["prompt"]) == 56 and "echo" not in call and call["logprobs"] == 20
    assert run.bodies == []
    # vLLM gets the rendered text and tokenizes it itself, with no special tokens added:
    # the same ids Plaudit would have sent, for none of its CPU (issue 19).
    text = tokenizer.prompt_text([user("pick A")])
    assert call["prompt"][0] == text and call["add_special_tokens"] is False
    assert tokenizer.encode(text) == tokenizer.prompt_ids([user("pick A")])


async def test_servers_other_than_vllm_get_token_ids_for_the_next_token_call(
    stand_in: StandIn, tokenizer: ChatTokenizer
) -> None:
    run_id, run = new_run(stand_in)
    letters(run, tokenizer, [user("pick A")])
    config = OpenAIConfig(stand_in.url("proper", run_id), MODEL)
    async with OpenAIBackend(config, tokenizer=tokenizer, compat="sglang") as judge:
        [result] = await judge.score_choices([ChoiceRequest([user("pick A")], ["A", "B"])])
    assert result.ok and result.logprobs == pytest.approx((-0.3, -1.5))
    [call] = run.completions
    assert call["prompt"] == [tokenizer.prompt_ids([user("pick A")])]
    assert "add_special_tokens" not in call


async def test_no_echoed_logprobs_gives_a_verdict_for_that_call(
    stand_in: StandIn, tokenizer: ChatTokenizer
) -> None:
    run_id, run = new_run(stand_in)
    async with backend(stand_in, "null-logprobs", run_id, tokenizer) as judge:
        [result] = await judge.score_choices([ChoiceRequest([user("reply:Score: 10")], GRADES)])
    assert result.ok and result.best() == "10" and result.coverage is None
    assert len(run.completions) == 1 and len(run.bodies) == 1


async def test_a_too_long_prompt_is_invalid_and_spares_the_batch(
    stand_in: StandIn, tokenizer: ChatTokenizer
) -> None:
    run_id, run = new_run(stand_in)
    favour_ten(run, tokenizer)
    long = [user("Grade this from 1 to 10. " + "word " * 600)]
    async with backend(stand_in, "context-length", run_id, tokenizer) as judge:
        short, too_long = await judge.score_choices(
            [ChoiceRequest(PROMPT, GRADES), ChoiceRequest(long, GRADES)]
        )
    assert short.ok and short.best() == "10"
    assert too_long.status == "invalid" and "maximum context length" in (too_long.error or "")
    assert len(run.completions) == 3  # the batch, then each request alone


async def test_a_single_token_candidate_missing_from_the_list_is_scored_exactly(
    stand_in: StandIn, tokenizer: ChatTokenizer
) -> None:
    run_id, run = new_run(stand_in)
    ids = letters(run, tokenizer, [user("pick A")])
    last = tokenizer.prompt_ids([user("pick A")])[-1]
    run.pair_logprobs[(last, ids["C"])] = -2.0
    run.token_text.pop(ids["C"])  # listed under another text: "C" is not in the list
    async with backend(stand_in, "proper", run_id, tokenizer) as judge:
        [result] = await judge.score_choices([ChoiceRequest([user("pick A")], ["A", "B", "C"])])
    # Teacher-forced in a second call, not given the list's floor.
    assert result.ok and result.logprobs == pytest.approx((-0.3, -1.5, -2.0))
    first, second = run.completions
    assert "echo" not in first and second["echo"] is True and run.bodies == []


async def test_the_tokenizer_is_found_in_the_served_model_s_directory(
    stand_in: StandIn, tokenizer: ChatTokenizer, smollm2_dir: Path, tmp_path: Path
) -> None:
    run_id, run = new_run(stand_in)
    expected = favour_ten(run, tokenizer)
    run.model_root = str(smollm2_dir)  # vLLM reports the directory it serves as "root"
    async with backend(stand_in, "proper", run_id, None) as judge:
        await judge.start()
        assert judge.info.details["choice_scoring"] == "sequence"
        [result] = await judge.score_choices([ChoiceRequest(PROMPT, GRADES)])
    assert result.best() == "10" and result.logprobs[-1] == pytest.approx(expected["10"])
    elsewhere, _ = new_run(stand_in)
    stand_in.runs[elsewhere].model_root = str(tmp_path / "on-another-host")
    async with backend(stand_in, "proper", elsewhere, None) as judge:
        await judge.start()
        assert judge.info.details["choice_scoring"] == "first_token"


def _whole(tokenizer: ChatTokenizer, messages: list[ChatMessage], prefix: str = "") -> str:
    return tokenizer._render(messages) + prefix


@pytest.mark.parametrize(
    "messages",
    [
        [user("pick A")],
        [ChatMessage(role="system", content="You judge."), user("Compare:\n<<a>>\nx\n<</a>>")],
        [ChatMessage(role="system", content="You judge."), user("  padded content  ")],
        [user("first"), ChatMessage(role="assistant", content="ok"), user("second {{ x }}")],
    ],
)
def test_a_prompt_cut_from_its_head_is_the_whole_rendering(
    tokenizer: ChatTokenizer, messages: list[ChatMessage]
) -> None:
    """The template runs once per head; the text is exactly what rendering it whole gives."""
    for prefix in ("", '{"verdict": "'):
        assert tokenizer.prompt_text(messages, prefix) == _whole(tokenizer, messages, prefix)
        assert tokenizer.prompt_text(messages, prefix) == _whole(tokenizer, messages, prefix)


def test_a_template_that_changes_the_content_is_rendered_whole(smollm2_dir: Path) -> None:
    shouting = ChatTokenizer.load(str(smollm2_dir))
    shouting._tokenizer.chat_template = (
        "{% for m in messages %}<{{ m.role }}>{{ m.content | upper }}\n{% endfor %}<assistant>"
    )
    messages = [ChatMessage(role="system", content="s"), user("quiet words")]
    assert shouting.prompt_text(messages) == "<system>S\n<user>QUIET WORDS\n<assistant>"
    assert shouting._frames == {(("system", "s"),): None}  # no verbatim frame: whole renders


def test_remembered_tails_are_the_computed_ones_and_callers_cannot_change_them(
    tokenizer: ChatTokenizer,
) -> None:
    labels = [str(grade) for grade in range(1, 11)]
    first = tokenizer.tails(labels)
    assert first is not None
    assert first[9] == [*tokenizer.encode("10"), tokenizer.end_id]  # "1" is a prefix of "10"
    first[0].append(-1)
    assert tokenizer.tails(labels) == [[*tokenizer.encode(g), tokenizer.end_id] for g in labels]
