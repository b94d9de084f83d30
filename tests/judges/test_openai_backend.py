"""The OpenAI-compatible backend against a real HTTP stand-in server on a loopback port.

One uvicorn server runs in a background thread for the module. In its routes,
``/{behaviour}/{run}/v1/chat/completions``, ``behaviour`` picks what it does on purpose
(logprobs, none, 429 then success, 500s, hanging, 400, slow) and ``run`` keeps each test's
requests apart. Retry sleeps are injected and recorded, never waited out.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import socket
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from judges.backends.base import ChoiceRequest, GenerateRequest, JudgeBackend, user
from judges.backends.openai_backend import (
    VERDICT_FLOOR_LOGPROB,
    OpenAIBackend,
    OpenAIConfig,
    choice_from_listed,
    is_verdict,
    verdict_result,
)
from judges.generation import GenerationRequest, Sampling, generate
from judges.limits import InProcessLimiter, LimiterUnavailable, RedisLimiter, RetryPolicy

REDIS_URL = os.environ.get("PLAUDIT_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
MODEL = "stand-in-judge"
RETRY_AFTER_S = 2
HANG_S = 5.0


@dataclass
class Run:  # what the stand-in saw for one test
    bodies: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    in_flight: int = 0
    peak: int = 0


def chat_reply(content: str, usage: Any = None, **choice: Any) -> JSONResponse:
    """A chat completion; ``choice`` sets fields of ``choices[0]`` (``logprobs``: null)."""
    message = {"role": "assistant", "content": content}
    first = {"index": 0, "message": message, "finish_reason": "stop", "logprobs": None, **choice}
    if first.pop("drop_logprobs", False):
        del first["logprobs"]
    return JSONResponse({"object": "chat.completion", "choices": [first], "usage": usage})


def listed_tokens(body: dict[str, Any]) -> list[tuple[str, float]]:
    """The stand-in's first-token distribution: it favours the letter the prompt asks for."""
    text = str(body["messages"][0]["content"])  # the user turn
    if "off-format" in text:
        return [("The", -0.4), ("I", -1.6)]
    favoured, other = ("B", "A") if "pick B" in text else ("A", "B")
    return [(favoured, -0.2), (" " + favoured, -3.0), (other, -2.5), ("The", -6.0)]


def proper(body: dict[str, Any]) -> JSONResponse:
    """A well-behaved server: logprobs when asked, else a generated reply."""
    if body.get("logprobs"):
        listed = listed_tokens(body)
        entries = [{"token": t, "logprob": lp, "bytes": list(t.encode())} for t, lp in listed]
        first = {**entries[0], "top_logprobs": entries[: body["top_logprobs"]]}
        return chat_reply(listed[0][0], logprobs={"content": [first]})
    max_tokens = int(body["max_tokens"])
    return chat_reply(
        f"seed={body.get('seed')} temperature={body['temperature']}",
        usage={"prompt_tokens": 9, "completion_tokens": min(max_tokens, 8)},
        finish_reason="length" if max_tokens < 8 else "stop",
    )


def verdict_only(body: dict[str, Any], *, drop: bool = False) -> JSONResponse:
    """A server without logprobs: replies with the text after ``reply:`` in the prompt."""
    text = str(body["messages"][0]["content"])  # the user turn
    content = text.split("reply:", 1)[1] if "reply:" in text else "Verdict: [[B]]"
    return chat_reply(content, drop_logprobs=drop)


def structured(body: dict[str, Any], behaviour: str) -> JSONResponse:
    """``n`` choices (listed last first): JSON under a ``response_format`` schema, unless the
    server ignores it; ``one-choice`` answers one choice whatever ``n`` is."""
    n = 1 if behaviour == "one-choice" else int(body.get("n", 1))
    follows = "response_format" in body and behaviour != "ignores-schema"
    choices = [
        {
            "index": i,
            "message": {
                "role": "assistant",
                "content": json.dumps({"answer": i}) if follows else "Sure! The answer is 1.",
            },
            "finish_reason": "stop",
        }
        for i in reversed(range(n))
    ]
    usage = {"prompt_tokens": 5, "completion_tokens": 4 * n}
    return JSONResponse(
        {"id": "c", "object": "chat.completion", "choices": choices, "usage": usage}
    )


def error(code: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "code": code}}, code, headers=headers)


async def behave(behaviour: str, run: Run, body: dict[str, Any]) -> Response:
    """What the stand-in does on purpose; anything not singled out answers properly."""
    count = len(run.bodies)
    if behaviour == "rejects-logprobs" and body.get("logprobs"):
        return error(400, "logprobs are not supported for this model")
    if behaviour in ("null-logprobs", "absent-logprobs", "rejects-logprobs"):
        return verdict_only(body, drop=behaviour == "absent-logprobs")
    if behaviour == "rate-limited" and count == 1:
        return error(429, "slow down", {"Retry-After": str(RETRY_AFTER_S)})
    if behaviour.startswith("fail500x") and count <= int(behaviour.removeprefix("fail500x")):
        return error(500, "internal error")
    if behaviour == "bad-request":
        return error(400, "unknown field 'frobnicate'")
    if behaviour == "not-json":
        return Response("<html>gateway</html>", 200, media_type="text/html")
    if behaviour in ("structured", "ignores-schema", "one-choice"):
        return structured(body, behaviour)
    await asyncio.sleep({"hang": HANG_S, "slow": 0.05}.get(behaviour, 0))
    return proper(body)


def stand_in_app(runs: dict[str, Run]) -> FastAPI:
    app = FastAPI()

    @app.post("/{behaviour}/{run_id}/v1/chat/completions")
    async def chat(behaviour: str, run_id: str, request: Request) -> Response:
        run = runs.setdefault(run_id, Run())
        body = await request.json()
        run.bodies.append(body)
        run.headers.append(dict(request.headers))
        run.in_flight += 1
        run.peak = max(run.peak, run.in_flight)
        try:
            return await behave(behaviour, run, body)
        finally:
            run.in_flight -= 1

    @app.get("/{behaviour}/{run_id}/v1/models")
    async def models(behaviour: str, run_id: str) -> Response:
        if behaviour == "no-models":
            return JSONResponse({"object": "list", "data": []})
        return JSONResponse({"object": "list", "data": [{"id": MODEL, "object": "model"}]})

    return app


@pytest.fixture(scope="module")
def stand_in() -> Iterator[tuple[int, dict[str, Run]]]:
    """The stand-in server, listening on a free loopback port in a background thread."""
    runs: dict[str, Run] = {}
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(
        stand_in_app(runs), log_level="warning", lifespan="off", timeout_graceful_shutdown=1
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "stand-in did not start"
        time.sleep(0.01)
    yield sock.getsockname()[1], runs
    server.should_exit = True
    thread.join(timeout=10)
    sock.close()


@dataclass
class Harness:
    """One test's view of the stand-in, and the backoff delays its backends asked for."""

    port: int
    runs: dict[str, Run]
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    sleeps: list[float] = field(default_factory=list)

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)  # recorded, not waited out

    def url(self, behaviour: str) -> str:
        return f"http://127.0.0.1:{self.port}/{behaviour}/{self.run_id}/v1"

    def backend(self, behaviour: str, **overrides: Any) -> OpenAIBackend:
        limiter = overrides.pop("limiter", None)
        config = OpenAIConfig(self.url(behaviour), **{"model": MODEL, **overrides})
        return OpenAIBackend(config, limiter=limiter, sleep=self.sleep)

    @property
    def run(self) -> Run:
        return self.runs.get(self.run_id, Run())


@pytest.fixture
def harness(stand_in: tuple[int, dict[str, Run]]) -> Harness:
    return Harness(*stand_in)


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


@pytest.mark.parametrize("behaviour", ["null-logprobs", "absent-logprobs", "rejects-logprobs"])
async def test_missing_logprobs_fall_back_to_a_parsed_verdict(
    harness: Harness, behaviour: str
) -> None:
    grades = tuple(str(i) for i in range(1, 6))
    async with harness.backend(behaviour) as backend:
        [first] = await backend.score_choices([ask("Judge. reply:After thought, [[A]]")])
        assert not backend.info.supports_logprobs
        later = await backend.score_choices(
            [ask("Grade. reply:Score: 4", grades), ask("reply:I cannot decide"), ask("x")]
        )
    assert first.ok and is_verdict(first) and first.coverage is None
    assert first.probs == (1.0, 0.0) and first.logprobs == (0.0, VERDICT_FLOOR_LOGPROB)
    grade, unparseable, default = later
    assert grade.ok and grade.best() == "4" and grade.probs[3] == 1.0
    assert unparseable.status == "error" and "unparseable" in (unparseable.error or "")
    assert default.best() == "B"
    asked = [bool(b.get("logprobs")) for b in harness.run.bodies]
    assert asked == [True, False, False, False, False]  # later calls go straight to verdicts


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
    retry = RetryPolicy(backoff_base_s=0.01)
    async with harness.backend("rate-limited", retry=retry) as backend:
        [result] = await backend.score_choices([ask("pick B")])
    assert result.ok and result.best() == "B"
    assert len(harness.run.bodies) == 2
    assert len(harness.sleeps) == 1 and harness.sleeps[0] >= RETRY_AFTER_S


async def test_500s_are_retried_with_growing_backoff_until_retries_run_out(
    harness: Harness,
) -> None:
    retry = RetryPolicy(max_retries=3, backoff_base_s=1.0, backoff_max_s=100.0)
    async with harness.backend("fail500x2", retry=retry) as backend:
        [result] = await backend.score_choices([ask("pick A")])
    assert result.ok and len(harness.run.bodies) == 3
    first, second = harness.sleeps
    assert 0.5 <= first <= 1.0 and 1.0 <= second <= 2.0
    always = Harness(harness.port, harness.runs)
    async with always.backend("fail500x99", retry=RetryPolicy(max_retries=2)) as persistent:
        [choice] = await persistent.score_choices([ask("pick A")])
    assert choice.status == "error" and "HTTP 500" in (choice.error or "")
    assert len(always.run.bodies) == 3 and len(always.sleeps) == 2


async def test_a_hanging_server_gives_timeout_items(harness: Harness) -> None:
    retry = RetryPolicy(max_retries=1)
    async with harness.backend("hang", timeout_s=0.3, retry=retry) as backend:
        [choice] = await backend.score_choices([ask("pick A")])
        [generated] = await backend.generate([GenerateRequest([user("hi")])])
    assert choice.status == "timeout" and generated.status == "timeout"
    assert "Timeout" in (choice.error or "")
    assert len(harness.run.bodies) == 4  # two attempts per item


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
    url, retry = f"http://127.0.0.1:{closed_port}/v1", RetryPolicy(max_retries=2)
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
    listed = choice_from_listed(["yes", "no"], [("\u0120yes", -0.2), ("\u2581no", -1.8)])
    assert listed.logprobs == (-0.2, -1.8) and listed.best() == "yes"


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
