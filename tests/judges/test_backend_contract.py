"""The backend contract without a model: result types, validation, the scripted backend."""

from __future__ import annotations

import math

import pytest

from judges.backends.base import (
    ChoiceRequest,
    ChoiceResult,
    GenerateRequest,
    JudgeBackend,
    system,
    user,
    validate_choice,
    validate_generate,
)
from tests.judges.scripted_backend import ScriptedBackend


def test_from_logprobs_normalizes_over_candidates() -> None:
    result = ChoiceResult.from_logprobs(["A", "B"], [math.log(0.3), math.log(0.1)])
    assert result.ok
    assert result.probs == pytest.approx((0.75, 0.25))
    assert result.coverage == pytest.approx(0.4)
    assert result.best() == "A"


def test_from_logprobs_handles_extreme_values() -> None:
    result = ChoiceResult.from_logprobs(["A", "B"], [-1000.0, -math.inf])
    assert result.ok and result.probs == (1.0, 0.0)
    assert ChoiceResult.from_logprobs(["A"], [-math.inf]).status == "error"
    assert ChoiceResult.from_logprobs(["A", "B"], [math.nan, 0.0]).status == "error"


def test_failed_result_has_no_scores() -> None:
    failed = ChoiceResult.failed("timeout", "too slow")
    assert not failed.ok and failed.best() is None and failed.probs == ()


@pytest.mark.parametrize(
    ("request_", "problem"),
    [
        (ChoiceRequest([], ["A"]), "messages must not be empty"),
        (ChoiceRequest([user("x")], []), "candidates must not be empty"),
        (ChoiceRequest([user("x")], ["A", "A"]), "distinct"),
        (ChoiceRequest([user("x")], ["A", ""]), "non-empty"),
        (ChoiceRequest([{"role": "bot", "content": "x"}], ["A"]), "unknown role"),  # type: ignore[typeddict-item]
        (ChoiceRequest([{"role": "user"}], ["A"]), "exactly the keys"),  # type: ignore[typeddict-item]
    ],
)
def test_invalid_choice_requests(request_: ChoiceRequest, problem: str) -> None:
    assert problem in (validate_choice(request_) or "")


def test_valid_requests_pass_validation() -> None:
    assert validate_choice(ChoiceRequest([system("s"), user("u")], ["A", "B"])) is None
    assert (
        validate_generate(GenerateRequest([user("u")], max_new_tokens=1, temperature=0.5)) is None
    )
    assert validate_generate(GenerateRequest([user("u")], temperature=-1)) is not None
    assert validate_generate(GenerateRequest([user("u")], temperature=math.inf)) is not None


@pytest.mark.asyncio
async def test_scripted_backend_follows_the_contract() -> None:
    def choose(request: ChoiceRequest) -> list[float]:
        if "boom" in request.messages[-1]["content"]:
            raise RuntimeError("script failed")
        return [-0.1, -3.0]

    backend = ScriptedBackend(choose=choose, reply=lambda r: "one two three")
    assert isinstance(backend, JudgeBackend)
    results = await backend.score_choices(
        [
            ChoiceRequest([user("fine")], ["A", "B"]),
            ChoiceRequest([user("boom")], ["A", "B"]),
            ChoiceRequest([user("fine")], []),
        ]
    )
    assert [r.status for r in results] == ["ok", "error", "invalid"]
    assert results[0].best() == "A"
    [short, full] = await backend.generate(
        [GenerateRequest([user("x")], max_new_tokens=2), GenerateRequest([user("x")])]
    )
    assert (short.text, short.finish_reason) == ("one two", "length")
    assert (full.text, full.finish_reason) == ("one two three", "stop")
    assert len(backend.calls) == 2
