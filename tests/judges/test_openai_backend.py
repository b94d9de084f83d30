"""The OpenAI-compatible backend against a real HTTP stand-in server on a loopback port.

One stand-in (tests/judges/openai_standin.py) runs in a background thread for the module. In
its routes, ``/{behaviour}/{run}/v1/chat/completions``, ``behaviour`` picks what it does on
purpose (logprobs, none, 429 then success, 500s, hanging, 400, slow) and ``run`` keeps each
test's requests apart. Retry sleeps are injected and recorded, never waited out.
"""

from __future__ import annotations

import asyncio
import math
import os
import socket
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from judges import limits as limits_module
from judges.backends.base import ChoiceRequest, ChoiceResult, GenerateRequest, JudgeBackend, user
from judges.backends.openai_backend import (
    VERDICT_FLOOR_LOGPROB,
    OpenAIBackend,
    OpenAIConfig,
    choice_from_listed,
    is_verdict,
    verdict_result,
)
from judges.backends.openai_replies import listed_choice
from judges.backends.sequence_scoring import next_token_lists
from judges.generation import GenerationRequest, Sampling, generate
from judges.limits import InProcessLimiter, LimiterUnavailable, RedisLimiter
from plaudit_wire.retry import Backoff
from services.core.models.layer import model_backend
from services.settings import Settings
from tests.judges.openai_standin import MODEL, RETRY_AFTER_S, Run, StandIn, stand_in_server

REDIS_URL = os.environ.get("PLAUDIT_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


@pytest.fixture(scope="module")
def stand_in() -> Iterator[StandIn]:
    """The stand-in server, shared by the module's tests (each keeps to its own run)."""
    with stand_in_server() as server:
        yield server


@dataclass
class Harness:
    """One test's view of the stand-in, and the backoff delays its backends asked for."""

    server: StandIn
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    sleeps: list[float] = field(default_factory=list)

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)  # recorded, not waited out

    def url(self, behaviour: str) -> str:
        return self.server.url(behaviour, self.run_id)

    def backend(self, behaviour: str, **overrides: Any) -> OpenAIBackend:
        limiter = overrides.pop("limiter", None)
        config = OpenAIConfig(self.url(behaviour), **{"model": MODEL, **overrides})
        return OpenAIBackend(config, limiter=limiter, sleep=self.sleep)

    @property
    def run(self) -> Run:
        return self.server.run(self.run_id)


@pytest.fixture
def harness(stand_in: StandIn) -> Harness:
    return Harness(stand_in)


def ask(text: str, candidates: tuple[str, ...] = ("A", "B"), prefix: str = "") -> ChoiceRequest:
    return ChoiceRequest(messages=[user(text)], candidates=candidates, assistant_prefix=prefix)


def lse(*values: float) -> float:
    return math.log(sum(math.exp(v) for v in values))


async def test_choices_are_read_from_top_logprobs(harness: Harness) -> None:
    async with harness.backend("proper", api_key="sk-test") as backend:
        assert isinstance(backend, JudgeBackend)
        assert backend.info.model_id == MODEL and backend.info.supports_logprobs
        a, b, bad = await backend.score_choices(
            [ask("Which? pick A"), ask("Which? pick B"), ask("x", ())]
        )
    assert a.ok and b.ok and not is_verdict(a)
    assert a.best() == "A" and b.best() == "B"
    # "A" and " A" are the same answer: their probabilities add up.
    assert a.logprobs == pytest.approx((lse(-0.2, -3.0), -2.5))
    assert math.isclose(sum(a.probs), 1.0)
    assert a.coverage == pytest.approx(math.exp(lse(-0.2, -3.0)) + math.exp(-2.5))
    assert bad.status == "invalid"
    assert len(harness.run.bodies) == 2  # the invalid item never reached the server
    for sent in harness.run.bodies:  # the two items arrive in either order
        assert sent["logprobs"] is True and sent["top_logprobs"] == 20
        assert sent["max_tokens"] == 1 and sent["model"] == MODEL
    assert [user("Which? pick A")] in [sent["messages"] for sent in harness.run.bodies]
    assert {h["authorization"] for h in harness.run.headers} == {"Bearer sk-test"}


async def test_unlisted_candidates_get_the_floor(harness: Harness) -> None:
    async with harness.backend("proper") as backend:
        three, none = await backend.score_choices(
            [ask("pick A", ("A", "B", "C")), ask("off-format", ("A", "B"))]
        )
    assert three.ok and three.logprobs[2] == -6.0  # the lowest listed logprob
    assert none.ok and none.probs == pytest.approx((0.5, 0.5))
    assert none.coverage == 0.0  # no candidate was listed at all


async def test_assistant_prefix_is_sent_as_a_prefilled_turn(harness: Harness) -> None:
    async with harness.backend("proper") as prefilled:
        await prefilled.score_choices([ask("pick A", prefix="Verdict: ")])
    async with harness.backend("proper", prefill=False) as strict:
        await strict.score_choices([ask("pick A", prefix="Verdict: ")])
    first, second = harness.run.bodies
    assert first["messages"][-1] == {"role": "assistant", "content": "Verdict: "}
    assert first["continue_final_message"] is True and first["add_generation_prompt"] is False
    assert second["messages"][-1]["role"] == "assistant"
    assert "continue_final_message" not in second


async def test_compat_openai_sends_only_fields_openai_takes(harness: Harness) -> None:
    config = harness.backend("proper").config
    async with OpenAIBackend(config, compat="openai") as backend:
        [result] = await backend.score_choices([ask("pick A", prefix="Verdict: ")])
        await backend.generate([GenerateRequest([user("hi")], max_new_tokens=5)])
    assert result.ok
    for sent in harness.run.bodies:  # OpenAI's reasoning models refuse max_tokens
        assert "max_tokens" not in sent and sent["max_completion_tokens"] in (1, 5)
        assert "continue_final_message" not in sent and "add_generation_prompt" not in sent


@pytest.mark.parametrize("behaviour", ["null-logprobs", "absent-logprobs", "rejects-logprobs"])
async def test_missing_logprobs_fall_back_to_a_parsed_verdict(
    harness: Harness, behaviour: str
) -> None:
    grades = tuple(str(i) for i in range(1, 6))
    async with harness.backend(behaviour) as backend:
        [first] = await backend.score_choices([ask("Judge. reply:After thought, [[A]]")])
        assert backend.info.supports_logprobs, "one reply without logprobs is not sticky"
        later = await backend.score_choices(
            [ask("Grade. reply:Score: 4", grades), ask("reply:I cannot decide"), ask("x")]
        )
    assert first.ok and is_verdict(first) and first.coverage is None
    assert first.probs == (1.0, 0.0) and first.logprobs == (0.0, VERDICT_FLOOR_LOGPROB)
    grade, unparseable, default = later
    assert grade.ok and grade.best() == "4" and grade.probs[3] == 1.0
    assert unparseable.status == "error" and "unparseable" in (unparseable.error or "")
    assert default.best() == "B"
    # Issue 19: every call asks for logprobs again (before, later calls went straight to
    # verdicts for the life of the process): 4 items, each a logprob ask and a verdict.
    asked = sorted(bool(b.get("logprobs")) for b in harness.run.bodies)
    assert asked == [False] * 4 + [True] * 4


async def test_logprobs_mode_reports_missing_logprobs_instead(harness: Harness) -> None:
    async with harness.backend("null-logprobs", choice_mode="logprobs") as backend:
        [result] = await backend.score_choices([ask("x")])
    assert result.status == "error" and "no logprobs" in (result.error or "")
    assert len(harness.run.bodies) == 1


async def test_verdict_mode_never_asks_for_logprobs(harness: Harness) -> None:
    async with harness.backend("proper", choice_mode="verdict") as backend:
        assert not backend.info.supports_logprobs
        [result] = await backend.score_choices([ask("pick A")])
    assert result.status == "error"  # the stand-in's generated text names no verdict
    [sent] = harness.run.bodies
    assert "logprobs" not in sent and sent["max_tokens"] == 32


async def test_429_is_retried_after_the_retry_after_header(harness: Harness) -> None:
    retry = Backoff(backoff=0.01)
    async with harness.backend("rate-limited", retry=retry) as backend:
        [result] = await backend.score_choices([ask("pick B")])
    assert result.ok and result.best() == "B"
    assert len(harness.run.bodies) == 2
    assert len(harness.sleeps) == 1 and harness.sleeps[0] >= RETRY_AFTER_S


async def test_500s_are_retried_with_growing_backoff_until_retries_run_out(
    harness: Harness,
) -> None:
    # The top of each full-jitter draw, so the doubling shows (the one policy: issue 20).
    top = Backoff(max_retries=3, backoff=1.0, max_backoff=100.0, jitter=lambda low, high: high)
    async with harness.backend("fail500x2", retry=top) as backend:
        [result] = await backend.score_choices([ask("pick A")])
    assert result.ok and len(harness.run.bodies) == 3
    assert harness.sleeps == [1.0, 2.0]
    always = Harness(harness.server)
    async with always.backend("fail500x99", retry=Backoff(max_retries=2)) as persistent:
        [choice] = await persistent.score_choices([ask("pick A")])
    assert choice.status == "error" and "HTTP 500" in (choice.error or "")
    assert len(always.run.bodies) == 3 and len(always.sleeps) == 2


async def test_a_hanging_server_gives_timeout_items(harness: Harness) -> None:
    retry = Backoff(max_retries=1)
    backend = harness.backend("hang", timeout_s=30, retry=retry)
    async with OpenAIBackend(backend.config, sleep=harness.sleep, attempt_timeout_s=0.3) as judge:
        [choice] = await judge.score_choices([ask("pick A")])
        [generated] = await judge.generate([GenerateRequest([user("hi")])])
    await backend.aclose()
    assert choice.status == "timeout" and generated.status == "timeout"
    assert "Timeout" in (choice.error or "")
    assert len(harness.run.bodies) == 4  # two attempts per item


async def test_the_default_attempt_timeout_leaves_room_for_a_retry(harness: Harness) -> None:
    # Issue 19: the per-attempt timeout equalled the request's (300 s), so no retry could
    # ever follow a timeout. Now attempts share the deadline: 0.6 s over 2 tries is 0.3 s each.
    retry = Backoff(max_retries=1, backoff=0.01, max_backoff=0.01)
    async with harness.backend("hang", timeout_s=0.6, retry=retry) as backend:
        assert backend.attempt_timeout_s == pytest.approx(0.3)
        [choice] = await backend.score_choices([ask("pick A")])
    assert choice.status == "timeout" and len(harness.run.bodies) == 2


@pytest.mark.parametrize(
    ("behaviour", "message"),
    [("bad-request", "HTTP 400: unknown field 'frobnicate'"), ("not-json", "no JSON object")],
)
async def test_400_and_non_json_answers_are_not_retried(
    harness: Harness, behaviour: str, message: str
) -> None:
    async with harness.backend(behaviour) as backend:
        [choice] = await backend.score_choices([ask("pick A")])
        [generated] = await backend.generate([GenerateRequest([user("hi")])])
    assert choice.status == generated.status == "error"
    assert message in (choice.error or "")
    assert len(harness.run.bodies) == 2 and harness.sleeps == []


async def test_connection_refused_is_retried_then_an_error(harness: Harness) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed_port = sock.getsockname()[1]
    url, retry = f"http://127.0.0.1:{closed_port}/v1", Backoff(max_retries=2)
    async with OpenAIBackend(OpenAIConfig(url, MODEL, retry=retry), sleep=harness.sleep) as backend:
        [choice] = await backend.score_choices([ask("pick A")])
    assert choice.status == "error" and "ConnectError" in (choice.error or "")
    assert len(harness.sleeps) == 2


async def test_the_limiter_bounds_requests_in_flight(harness: Harness) -> None:
    limiter = InProcessLimiter(max_concurrency=3)
    async with harness.backend("slow", limiter=limiter) as backend:
        results = await backend.score_choices([ask(f"pick A {i}") for i in range(24)])
    assert all(r.ok for r in results)
    assert len(harness.run.bodies) == 24
    assert 2 <= harness.run.peak <= 3


@pytest.fixture
async def redis_limiters() -> AsyncIterator[list[RedisLimiter]]:  # as two processes would have
    name = f"test-{uuid.uuid4().hex}"
    limiters = [RedisLimiter(REDIS_URL, name, max_concurrency=3) for _ in range(2)]
    try:
        await limiters[0].in_use()
    except LimiterUnavailable as exc:
        if IN_CI:
            pytest.fail(f"CI=true but Redis at {REDIS_URL} is unreachable: {exc}")
        pytest.skip(f"Redis at {REDIS_URL} unreachable: {exc}")
    yield limiters
    for limiter in limiters:
        await limiter.aclose()


async def test_two_backends_share_a_redis_limit(
    harness: Harness, redis_limiters: list[RedisLimiter]
) -> None:
    backends = [harness.backend("slow", limiter=limiter) for limiter in redis_limiters]
    batches = await asyncio.gather(
        *(b.score_choices([ask(f"pick B {i}") for i in range(8)]) for b in backends)
    )
    for backend in backends:
        await backend.aclose()
    assert all(r.ok for batch in batches for r in batch)
    assert 2 <= harness.run.peak <= 3


class ClosingLimiter(InProcessLimiter):
    """An in-process limiter that remembers being closed."""

    closed = False

    async def aclose(self) -> None:
        self.closed = True


async def test_the_factory_s_limiter_is_closed_with_its_backend(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The factory's RedisLimiter holds a Redis connection that nothing else would close.
    made: list[ClosingLimiter] = []

    def make_limiter(redis_url: str | None, **limits: Any) -> ClosingLimiter:
        made.append(ClosingLimiter(limits["max_concurrency"]))
        return made[-1]

    monkeypatch.setattr(limits_module, "make_limiter", make_limiter)
    judge = {"backend": "openai", "base_url": harness.url("proper"), "model": MODEL}
    settings = Settings(judge=judge, _env_file=None)
    backend = model_backend(settings, "judge", settings.judge)
    [result] = await backend.score_choices([ask("pick A")])
    await backend.aclose()
    assert result.ok and [limiter.closed for limiter in made] == [True]
    lent = ClosingLimiter()
    async with harness.backend("proper", limiter=lent):
        pass
    assert not lent.closed, "a limiter passed in stays the caller's"


async def test_generate_passes_settings_and_maps_finish_reasons(harness: Harness) -> None:
    async with harness.backend("proper") as backend:
        long, short, invalid = await backend.generate(
            [
                GenerateRequest([user("hi")], max_new_tokens=64, temperature=0.7, seed=11),
                GenerateRequest([user("hi")], max_new_tokens=3),
                GenerateRequest([user("hi")], max_new_tokens=0),
            ]
        )
    assert long.ok and long.text == "seed=11 temperature=0.7"
    assert long.finish_reason == "stop" and long.num_tokens == 8
    assert short.ok and short.finish_reason == "length" and short.num_tokens == 3
    assert invalid.status == "invalid"
    sent = {b["max_tokens"]: b for b in harness.run.bodies}
    assert sent[64]["seed"] == 11 and "seed" not in sent[3] and "logprobs" not in sent[3]


def test_verdicts_and_listed_tokens_are_read_without_a_server() -> None:
    assert verdict_result("It's a tie.", ["A", "B"]).probs == (0.5, 0.5)
    assert verdict_result("Rating: 7/10", [str(i) for i in range(1, 11)]).best() == "7"
    assert verdict_result("Yes, because...", ["yes", "no"]).best() == "yes"
    assert verdict_result("Score: 11", ["1", "2", "3"]).status == "error"
    listed = choice_from_listed(["yes", "no"], {"\u0120yes": -0.2, "\u2581no": -1.8})
    assert listed.logprobs == (-0.2, -1.8) and listed.best() == "yes"


def test_listed_tokens_that_strip_alike_are_summed_and_a_missing_one_is_told_apart() -> None:
    pairs = {" A": math.log(0.3), "A": math.log(0.2), "B": math.log(0.1), "x": -9.0}
    summed = listed_choice(["A", "B"], pairs)
    assert summed is not None and summed.logprobs == pytest.approx((math.log(0.5), math.log(0.1)))
    assert summed.coverage == pytest.approx(0.6) and summed.probs[0] == pytest.approx(5 / 6)
    assert listed_choice(["A", "C"], pairs) is None  # the caller scores it another way
    floored = choice_from_listed(["A", "C"], pairs)
    assert floored.logprobs[1] == -9.0 and floored.coverage == pytest.approx(0.5)
    assert choice_from_listed(["A"], {}).status == "error"
    # A server's NaN or +inf for a candidate fails the item (no second call, no floor).
    for bad in (math.nan, math.inf):
        failed = listed_choice(["A", "B"], {"A": bad, "B": bad})
        assert failed is not None and failed.error == "candidate log-probabilities are not finite"
        assert choice_from_listed(["A", "C"], {"A": bad, "x": -1.0}).status == "error"


@pytest.mark.parametrize(
    ("logprobs", "ok"),
    [
        ((0.0, -1.0), True),
        ((-math.inf, -1.0), True),  # a candidate the model rules out
        ((-math.inf, -math.inf), False),
        ((math.nan, -1.0), False),
        ((math.inf, -1.0), False),
        ((math.inf, -math.inf), False),
        ((-1.0, math.nan, -math.inf), False),
    ],
)
def test_scores_that_are_not_log_probabilities_fail_the_item(
    logprobs: tuple[float, ...], ok: bool
) -> None:
    result = ChoiceResult.from_logprobs("ABC"[: len(logprobs)], logprobs)
    assert result.ok is ok
    if ok:
        assert sum(result.probs) == pytest.approx(1.0)
    else:
        assert result.error == "candidate log-probabilities are not finite"


def test_a_completions_reply_lists_each_prompts_first_token() -> None:
    parsed = {"tokens": ["B"], "token_logprobs": [-2.0], "top_logprobs": [{"A": -0.5, "C": -1}]}
    odd = {"top_logprobs": [{"A": "-0.25", "B": -3.0}]}  # a number sent as text still reads
    body = {"choices": [{"index": 1, "logprobs": odd}, {"index": 0, "logprobs": parsed}]}
    lists = next_token_lists(body, 2)
    assert lists == [{"A": -0.5, "C": -1.0, "B": -2.0}, {"A": -0.25, "B": -3.0}]
    assert all(type(value) is float for listed in lists for value in listed.values())
    assert next_token_lists(body, 3) == "asked about 3 prompts, the server answered 2"
    body["choices"][0]["logprobs"] = {"top_logprobs": [{"A": None}]}
    assert next_token_lists(body, 2) == "the response has no logprobs"
    # A malformed sampled value fails the list even when its token is listed already.
    malformed = {"tokens": ["A"], "token_logprobs": ["oops"], "top_logprobs": [{"A": -0.1}]}
    body["choices"][0]["logprobs"] = malformed
    assert next_token_lists(body, 2) == "the response has no logprobs"
    assert malformed["top_logprobs"] == [{"A": -0.1}]  # the reply is read, never changed


async def test_the_served_model_is_found_when_none_is_configured(harness: Harness) -> None:
    async with harness.backend("proper", model="") as backend:
        assert not backend.started
        await backend.start()
        assert backend.started and backend.info.model_id == MODEL
        [result] = await backend.score_choices([ask("Which? pick B")])
        assert result.ok and harness.run.bodies[-1]["model"] == MODEL
    async with harness.backend("no-models", model="") as backend:
        with pytest.raises(RuntimeError, match="serves no model"):
            await backend.start()
        [result] = await backend.score_choices([ask("Which?")])
        assert result.status == "error" and "serves no model" in (result.error or "")


async def test_a_model_is_looked_up_on_first_use_when_start_was_skipped(harness: Harness) -> None:
    async with harness.backend("proper", model="") as backend:
        [result] = await backend.generate([GenerateRequest(messages=[user("hi")])])
        assert result.ok and backend.info.model_id == MODEL


ANSWER_SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "integer"}},
    "required": ["answer"],
    "additionalProperties": False,
}


async def test_structured_generation_sends_the_schema_and_validates_replies(
    harness: Harness,
) -> None:
    request = GenerationRequest(
        [user("hi")],
        Sampling(max_new_tokens=32, temperature=0.7, top_p=0.9, seed=4),
        stop=["\n\n"],
        n=3,
        schema=ANSWER_SCHEMA,
    )
    async with harness.backend("structured") as backend:
        [result] = await generate(backend.generate, [request])
    assert result.ok and [s.value for s in result.samples] == [{"answer": i} for i in range(3)]
    [body] = harness.run.bodies
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "output", "schema": ANSWER_SCHEMA, "strict": True},
    }
    assert (body["n"], body["stop"], body["top_p"], body["seed"]) == (3, ["\n\n"], 0.9, 4)
    plain = GenerationRequest([user("hi")])
    async with harness.backend("structured") as backend:
        [text] = await generate(backend.generate, [plain])
    assert text.samples[0].value == "Sure! The answer is 1."
    assert not {"response_format", "n", "stop", "top_p"} & set(harness.run.bodies[-1])


async def test_a_server_that_ignores_the_schema_gives_invalid_output(harness: Harness) -> None:
    request = GenerationRequest([user("hi")], n=2, schema=ANSWER_SCHEMA)
    async with harness.backend("ignores-schema") as backend:
        [result] = await generate(backend.generate, [request])
    assert result.ok and [s.status for s in result.samples] == ["invalid_output"] * 2
    assert result.samples[0].text == "Sure! The answer is 1." and result.samples[0].error
    async with harness.backend("one-choice") as backend:
        [short] = await generate(backend.generate, [request])
    assert short.status == "error" and "2 samples" in (short.error or "")
