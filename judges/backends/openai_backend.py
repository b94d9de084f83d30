"""A judge backend over any OpenAI-compatible server (vLLM, SGLang, llama.cpp, hosted APIs).

Each item is one ``POST {base_url}/chat/completions``; a batch's items go out concurrently,
each HTTP attempt bounded by a :class:`~judges.limits.Limiter`. Connect errors, timeouts,
408, 429 and 5xx are retried with jittered exponential backoff that honours ``Retry-After``;
other 4xx are not. A failed item gets status ``timeout`` or ``error``, and never raises.

Choice scoring (``choice_mode``): ``"auto"`` asks for ``logprobs: true, top_logprobs: 20,
max_tokens: 1`` and reads the candidates from the first token's list. A token matches a
candidate when both are equal after stripping leading whitespace and ``Ġ``/``▁``; matching
tokens (``"A"``, ``" A"``) are summed. An unlisted candidate gets the *floor*: the lowest
listed logprob, an upper bound on its true one; ``coverage`` counts listed candidates only
(0.0 with uniform ``probs`` when none is). When the server gives no logprobs (null, absent,
or a 400 that mentions them) the item falls back to a verdict, and later calls go straight
to verdicts. ``"logprobs"`` never falls back (an ``error`` instead); ``"verdict"`` always
generates a short reply and parses it with :mod:`judges.parsing`.

A verdict result has ``coverage=None`` (:func:`is_verdict`), ``probs`` 1.0 for the parsed
candidate (0.5/0.5 for a pairwise tie) and ``logprobs = log(probs)``, ``log(0)`` clamped to
``VERDICT_FLOOR_LOGPROB``. Only the first token is scored, so candidates should be single
tokens (the vLLM and local backends score longer ones). An assistant prefix is sent as a
final assistant turn with vLLM/SGLang's ``continue_final_message`` (unless ``prefill=False``).

Example::

    config = OpenAIConfig("http://127.0.0.1:8000/v1", model="judge")
    async with OpenAIBackend(config) as backend:
        [res] = await backend.score_choices([ChoiceRequest([user("A or B?")], ["A", "B"])])
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import math
import random
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import httpx

from judges.backends.base import (
    BackendInfo,
    ChatMessage,
    ChoiceRequest,
    ChoiceResult,
    GeneratedText,
    GenerateRequest,
    GenerateResult,
    ItemStatus,
    validate_choice,
    validate_generate,
)
from judges.lifecycle import READY, Readiness
from judges.limits import (
    InProcessLimiter,
    Limiter,
    LimiterUnavailable,
    RetryPolicy,
    parse_retry_after,
)
from judges.parsing import parse_pairwise_verdict, parse_scale_grade

logger = logging.getLogger(__name__)

BACKEND_NAME = "openai-compatible"
VERDICT_FLOOR_LOGPROB = -100.0
"""The logprob a verdict result gives a candidate that was not chosen (``log(0)`` clamped)."""

ChoiceMode = Literal["auto", "logprobs", "verdict"]
Sleep = Callable[[float], Awaitable[None]]
R = TypeVar("R", ChoiceResult, GenerateResult)
_LEADING = " \t\n\r\u0120\u2581"  # whitespace, and the GPT-2 / SentencePiece space markers
_CHAT = "chat/completions"


@dataclass(frozen=True, slots=True)
class OpenAIConfig:
    """Where the server is and how to talk to it.

    ``base_url`` is the OpenAI root with ``/v1``, as for the OpenAI SDK. ``timeout_s``
    bounds each HTTP attempt; ``max_concurrency`` sizes the default in-process limiter;
    ``extra_body`` is merged into every request body (``chat_template_kwargs``, ...).
    Example: ``OpenAIConfig("http://vllm:8000/v1", model="Qwen/Qwen2.5-7B-Instruct")``.
    """

    base_url: str
    model: str
    api_key: str | None = field(default=None, repr=False)
    timeout_s: float = 60.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    choice_mode: ChoiceMode = "auto"
    top_logprobs: int = 20
    verdict_max_tokens: int = 32
    prefill: bool = True
    max_concurrency: int = 16
    extra_body: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class _Reply:
    body: dict[str, Any] | None = None
    status: ItemStatus = "ok"
    error: str = ""
    http_status: int | None = None
    retryable: bool = False
    retry_after: float | None = None


def is_verdict(result: ChoiceResult) -> bool:
    """True when an ``ok`` result came from a parsed verdict rather than logprobs."""
    return result.ok and result.coverage is None


class OpenAIBackend:
    """:class:`~judges.backends.base.JudgeBackend` over an OpenAI-compatible HTTP server.

    ``limiter`` defaults to an in-process one with ``config.max_concurrency`` slots; a
    ``limiter`` passed in is the caller's to close unless ``owns_limiter`` hands it over (a
    :class:`~judges.limits.RedisLimiter` built for this backend holds a Redis connection);
    a ``client`` passed in is the caller's to close; ``sleep`` and ``rng`` drive the backoff.
    """

    def __init__(
        self,
        config: OpenAIConfig,
        *,
        limiter: Limiter | None = None,
        owns_limiter: bool = False,
        client: httpx.AsyncClient | None = None,
        sleep: Sleep = asyncio.sleep,
        rng: random.Random | None = None,
        compat: Literal["vllm", "sglang", "openai"] = "vllm",
        attempt_timeout_s: float | None = None,
    ) -> None:
        if config.top_logprobs < 1 or config.verdict_max_tokens < 1:
            raise ValueError("top_logprobs and verdict_max_tokens must be positive")
        self.config = config
        self.compat = compat
        # One HTTP attempt; a retry can follow it (issue 19). Default: config.timeout_s.
        self._attempt_timeout_s = attempt_timeout_s or config.timeout_s
        self._limiter = limiter or InProcessLimiter(max_concurrency=config.max_concurrency)
        self._owns_limiter = owns_limiter or limiter is None
        self._owns_client = client is None
        headers = {"Authorization": f"Bearer {config.api_key}"} if config.api_key else {}
        self._client = client or httpx.AsyncClient(
            base_url=config.base_url,
            headers=headers,
            timeout=httpx.Timeout(self._attempt_timeout_s, pool=None),
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=64),
        )
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._logprobs_supported = config.choice_mode != "verdict"
        self._model = config.model
        self._start_error: str | None = None
        self._closed = False

    @property
    def started(self) -> bool:
        """False until the served model is known (configured, or found by :meth:`start`)."""
        return bool(self._model)

    async def start(self) -> None:
        """With no configured model, use the one the server lists at ``GET /models``.

        vLLM and llama.cpp's server serve one model, so the judge works with just the URL.
        Raises ``RuntimeError`` when the server is unreachable or lists no model.
        """
        if self._model:
            return
        try:
            served = await self._served_models()
        except RuntimeError as exc:
            self._start_error = str(exc)
            raise
        self._start_error = None
        if len(served) > 1:
            logger.warning(
                "%s serves %d models; judging with %s", self.config.base_url, len(served), served[0]
            )
        self._model = served[0]

    async def _served_models(self) -> list[str]:
        try:
            response = await self._client.get("models")
            response.raise_for_status()
            served = [str(m["id"]) for m in response.json().get("data", [])]
        except (httpx.HTTPError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise RuntimeError(
                f"could not list the models of {self.config.base_url}: {exc}"
            ) from exc
        if not served:
            raise RuntimeError(f"{self.config.base_url} serves no model")
        return served

    @property
    def readiness(self) -> Readiness:
        """``ready`` once the served model is known; ``failed`` with why it could not be
        listed (requests retry the lookup, so a server that comes up later recovers)."""
        if self._closed:
            return Readiness("closed")
        if self._model:
            return READY
        return Readiness("failed", self._start_error) if self._start_error else Readiness("idle")

    @property
    def info(self) -> BackendInfo:
        """Backend name, model id, and whether choices are still scored from logprobs."""
        details = {"base_url": self.config.base_url, "choice_mode": self.config.choice_mode}
        return BackendInfo(BACKEND_NAME, self._model, self._logprobs_supported, details)

    async def aclose(self) -> None:
        """Close the HTTP client and the limiter if they are the backend's."""
        self._closed = True
        if self._owns_client:
            await self._client.aclose()
        if self._owns_limiter:
            await self._limiter.aclose()

    async def __aenter__(self) -> OpenAIBackend:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def _missing_model(self) -> str | None:
        """Why no model can be named (the server was down at start and still is), or None."""
        try:
            await self.start()
        except RuntimeError as exc:
            return str(exc)
        return None

    async def score_choices(self, requests: Sequence[ChoiceRequest]) -> list[ChoiceResult]:
        """Score every request concurrently; one result per request, in order."""
        if problem := await self._missing_model():
            return [ChoiceResult.failed("error", problem) for _ in requests]
        items = (self._guard(self._score_one(r), ChoiceResult.failed) for r in requests)
        return list(await asyncio.gather(*items))

    async def generate(self, requests: Sequence[GenerateRequest]) -> list[GenerateResult]:
        """Generate every reply concurrently; one result per request, in order."""
        if problem := await self._missing_model():
            return [GenerateResult.failed("error", problem) for _ in requests]
        items = (self._guard(self._generate_one(r), GenerateResult.failed) for r in requests)
        return list(await asyncio.gather(*items))

    @staticmethod
    async def _guard(work: Awaitable[R], failed: Callable[[ItemStatus, str], R]) -> R:
        try:
            return await work
        except Exception as exc:  # one item never sinks the batch
            logger.exception("judge item failed")
            return failed("error", f"{type(exc).__name__}: {exc}")

    async def _score_one(self, request: ChoiceRequest) -> ChoiceResult:
        problem = validate_choice(request)
        if problem:
            return ChoiceResult.failed("invalid", problem)
        if self._logprobs_supported:
            result = await self._score_by_logprobs(request)
            if result is not None:
                return result
        return await self._score_by_verdict(request)

    async def _score_by_logprobs(self, request: ChoiceRequest) -> ChoiceResult | None:
        """The logprob result, or None when the server has no logprobs (fall back)."""
        body = self._chat_body(request.messages, request.assistant_prefix, 1, 0.0)
        body.update(logprobs=True, top_logprobs=self.config.top_logprobs)
        reply = await self._send(body)
        if reply.body is None:
            if reply.http_status == 400 and "logprob" in reply.error.lower():
                return self._no_logprobs(reply.error)
            return ChoiceResult.failed(reply.status, reply.error)
        listed = _first_token_logprobs(reply.body)
        if not listed:
            return self._no_logprobs("the response has no logprobs")
        return choice_from_listed(request.candidates, listed)

    def _no_logprobs(self, why: str) -> ChoiceResult | None:
        if self.config.choice_mode == "logprobs":
            return ChoiceResult.failed("error", f"no logprobs from the server: {why}")
        if self._logprobs_supported:
            logger.warning("%s gives no logprobs (%s); using verdicts", self.config.base_url, why)
        self._logprobs_supported = False
        return None

    async def _score_by_verdict(self, request: ChoiceRequest) -> ChoiceResult:
        prefix, max_tokens = request.assistant_prefix, self.config.verdict_max_tokens
        reply = await self._send(self._chat_body(request.messages, prefix, max_tokens, 0.0))
        if reply.body is None:
            return ChoiceResult.failed(reply.status, reply.error)
        text = _message_text(reply.body)
        if text is None:
            return ChoiceResult.failed("error", "the response has no message content")
        return verdict_result(prefix + text, request.candidates)

    async def _generate_one(self, request: GenerateRequest) -> GenerateResult:
        problem = validate_generate(request)
        if problem:
            return GenerateResult.failed("invalid", problem)
        body = self._chat_body(request.messages, "", request.max_new_tokens, request.temperature)
        body.update(generation_fields(request))
        reply = await self._send(body)
        if reply.body is None:
            return GenerateResult.failed(reply.status, reply.error)
        return _generate_result(reply.body, request.n)

    def _chat_body(
        self, messages: Sequence[ChatMessage], prefix: str, max_tokens: int, temperature: float
    ) -> dict[str, Any]:
        turns = [{"role": m["role"], "content": m["content"]} for m in messages]
        body: dict[str, Any] = {**self.config.extra_body, "model": self._model}
        body.update(max_tokens=max_tokens, temperature=temperature)
        if prefix:
            turns.append({"role": "assistant", "content": prefix})
            if self.config.prefill:
                body.update(continue_final_message=True, add_generation_prompt=False)
        body["messages"] = turns
        return body

    async def _send(self, body: dict[str, Any]) -> _Reply:
        """One chat request with retries; never raises for HTTP or transport failures."""
        retry = self.config.retry
        attempt = 0
        while True:
            reply = await self._attempt(body)
            if not reply.retryable or attempt >= retry.max_retries:
                return reply
            delay = retry.delay(attempt, reply.retry_after, self._rng)
            attempt += 1
            logger.warning(
                "retry %d/%d in %.2fs: %s", attempt, retry.max_retries, delay, reply.error
            )
            await self._sleep(delay)

    async def _attempt(self, body: dict[str, Any]) -> _Reply:
        try:
            # httpx bounds each phase; asyncio.timeout bounds the whole attempt.
            async with self._limiter.acquire(), asyncio.timeout(self._attempt_timeout_s):
                response = await self._client.post(_CHAT, json=body)
        except (httpx.TimeoutException, TimeoutError) as exc:
            why = f"{type(exc).__name__}: no answer within {self._attempt_timeout_s}s"
            return _Reply(status="timeout", error=why, retryable=True)
        except (httpx.TransportError, LimiterUnavailable) as exc:
            return _Reply(status="error", error=f"{type(exc).__name__}: {exc}", retryable=True)
        except httpx.HTTPError as exc:
            return _Reply(status="error", error=f"{type(exc).__name__}: {exc}")
        return _reply_from(response)


def _reply_from(response: httpx.Response) -> _Reply:
    code = response.status_code
    if 200 <= code < 300:
        with contextlib.suppress(ValueError):
            body = response.json()
            if isinstance(body, dict):
                return _Reply(body=body)
        return _Reply(status="error", error="the server answered with no JSON object")
    return _Reply(
        status="timeout" if code in (408, 504) else "error",
        error=f"HTTP {code}: {_server_message(response)}",
        http_status=code,
        retryable=code in (408, 429) or code >= 500,
        retry_after=parse_retry_after(response.headers.get("retry-after")),
    )


def _server_message(response: httpx.Response) -> str:
    """The server's error message (OpenAI, vLLM or FastAPI shape), cut to 300 characters."""
    try:
        body = response.json()
    except ValueError:
        return response.text[:300]
    if not isinstance(body, dict):
        return str(body)[:300]
    error = body.get("error")
    message = error.get("message") if isinstance(error, dict) else error
    return str(message or body.get("message") or body.get("detail") or body)[:300]


def _first_token_logprobs(body: Mapping[str, Any]) -> list[tuple[str, float]]:
    """``(token, logprob)`` for the first generated token: its tops, and the sampled one."""
    try:
        first = body["choices"][0]["logprobs"]["content"][0]
        listed: dict[str, float] = {}
        for entry in [*(first.get("top_logprobs") or []), first]:  # sampled is usually a top
            listed.setdefault(str(entry["token"]), float(entry["logprob"]))
        return list(listed.items())
    except (KeyError, IndexError, TypeError, ValueError, AttributeError):
        return []


def choice_from_listed(
    candidates: Sequence[str], listed: Sequence[tuple[str, float]]
) -> ChoiceResult:
    """Score candidates from the ``(token, logprob)`` pairs a server listed (see above).

    >>> choice_from_listed(["A", "B"], [(" A", -0.1), ("B", -2.5), ("The", -4.0)]).best()
    'A'
    """
    found: dict[str, list[float]] = {}
    for token, logprob in listed:
        found.setdefault(token.lstrip(_LEADING), []).append(logprob)
    floor = min(logprob for _, logprob in listed)
    keys = [c.lstrip(_LEADING) for c in candidates]
    logprobs = [_logsumexp(found[k]) if k in found else floor for k in keys]
    result = ChoiceResult.from_logprobs(candidates, logprobs)
    if not result.ok:
        return result
    coverage = sum(math.exp(lp) for k, lp in zip(keys, logprobs, strict=True) if k in found)
    return dataclasses.replace(result, coverage=min(1.0, coverage))


def _logsumexp(values: Sequence[float]) -> float:
    top = max(values)
    return top if math.isinf(top) else top + math.log(sum(math.exp(v - top) for v in values))


def verdict_result(text: str, candidates: Sequence[str]) -> ChoiceResult:
    """The candidate a reply names, as a one-hot result (``error`` when it names none).

    Two capital letters are read as a pairwise verdict (a tie is 0.5/0.5), whole numbers
    as a grade on their range, anything else by the reply's first word.

    >>> verdict_result("Verdict: [[B]]", ["A", "B"]).probs
    (0.0, 1.0)
    """
    probs: tuple[float, ...] | None
    if len(candidates) == 2 and all(len(c) == 1 and "A" <= c <= "Z" for c in candidates):
        winner = parse_pairwise_verdict(text, labels=(candidates[0], candidates[1])).winner
        probs = {"A": (1.0, 0.0), "B": (0.0, 1.0), "tie": (0.5, 0.5), None: None}[winner]
    elif len(candidates) > 1 and all(re.fullmatch(r"[-+]?\d+", c) for c in candidates):
        grades = [int(c) for c in candidates]
        grade = parse_scale_grade(text, low=min(grades), high=max(grades)).grade
        probs = None if grade is None else tuple(float(g == grade) for g in grades)
    else:
        head = text.strip().lstrip("\"'*([ ").lower()
        hits = [c for c in candidates if re.match(re.escape(c.lower()) + r"(?!\w)", head)]
        best = max(hits, key=len, default=None)
        probs = None if best is None else tuple(float(c == best) for c in candidates)
    if probs is None:
        return ChoiceResult.failed("error", "unparseable verdict (the server gave no logprobs)")
    logprobs = tuple(math.log(p) if p > 0 else VERDICT_FLOOR_LOGPROB for p in probs)
    return ChoiceResult("ok", tuple(candidates), logprobs, probs, coverage=None)


def _message_text(body: Mapping[str, Any]) -> str | None:
    with contextlib.suppress(KeyError, IndexError, TypeError):
        content = body["choices"][0]["message"]["content"]
        return content if isinstance(content, str) else None
    return None


def generation_fields(request: GenerateRequest) -> dict[str, Any]:
    """The chat-completion fields for a request's seed, ``top_p``, ``stop``, ``n`` and schema.

    A schema goes as ``response_format: {"type": "json_schema", ...}`` (vLLM enforces it
    with guided decoding; servers that ignore it are caught by :mod:`judges.generation`,
    which validates every reply).

    >>> generation_fields(GenerateRequest([], n=2, stop=["\\n"]))
    {'stop': ['\\n'], 'n': 2}
    """
    fields: dict[str, Any] = {}
    if request.seed is not None:
        fields["seed"] = request.seed
    if request.top_p < 1.0:
        fields["top_p"] = request.top_p
    if request.stop:
        fields["stop"] = list(request.stop)
    if request.n > 1:
        fields["n"] = request.n
    if request.json_schema is not None:
        fields["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "output", "schema": dict(request.json_schema), "strict": True},
        }
    return fields


def _generate_result(body: Mapping[str, Any], n: int = 1) -> GenerateResult:
    """Every choice as a sample, in ``index`` order (``n`` of them expected)."""
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices:
        return GenerateResult.failed("error", "the response has no choices")
    ordered = sorted(choices, key=lambda c: c.get("index", 0) if isinstance(c, dict) else 0)
    samples = [_sample(choice) for choice in ordered]
    if any(s is None for s in samples):
        return GenerateResult.failed("error", "the response has no message content")
    if len(samples) < n:
        return GenerateResult.failed("error", f"asked for {n} samples, got {len(samples)}")
    usage = body.get("usage")
    tokens = usage.get("completion_tokens") if isinstance(usage, dict) else None
    found = [s for s in samples if s is not None][:n]
    if n == 1 and isinstance(tokens, int):  # usage counts all choices together
        found[0] = dataclasses.replace(found[0], num_tokens=tokens)
    return GenerateResult.of(found)


def _sample(choice: Any) -> GeneratedText | None:
    message = choice.get("message") if isinstance(choice, dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, str):
        return None
    length = choice.get("finish_reason") == "length"
    return GeneratedText(content, 0, "length" if length else "stop")
