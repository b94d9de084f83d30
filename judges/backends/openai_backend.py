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
import time
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
from judges.backends.sequence_scoring import (
    ChatTokenizer,
    ForcedRows,
    completions_body,
    forced_rows,
    local_tokenizer_dir,
    tail_logprobs,
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
Compat = Literal["vllm", "sglang", "openai"]
Sleep = Callable[[float], Awaitable[None]]
T = TypeVar("T")
_LEADING = " \t\n\r\u0120\u2581"  # whitespace, and the GPT-2 / SentencePiece space markers
_CHAT = "chat/completions"
_COMPLETIONS = "completions"
MAX_PROMPTS_PER_CALL = 256
"""The most prompts one batched ``/v1/completions`` call carries."""
#: Phrases of an HTTP 400 that blames the input's length (vLLM, SGLang, OpenAI): the caller's
#: data, an ``invalid`` item (a 422), never a retried outage (issue 19).
_TOO_LONG = ("maximum context length", "context length", "too long", "context_length_exceeded")


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
        compat: Compat = "vllm",
        attempt_timeout_s: float | None = None,
        tokenizer: ChatTokenizer | str | None = None,
    ) -> None:
        if config.top_logprobs < 1 or config.verdict_max_tokens < 1:
            raise ValueError("top_logprobs and verdict_max_tokens must be positive")
        self.config = config
        self.compat: Compat = compat
        self.attempt_timeout_s = attempt_timeout_s or default_attempt_timeout(config)
        self._tokenizer = ChatTokenizer.load(tokenizer) if isinstance(tokenizer, str) else tokenizer
        self._limiter = limiter or InProcessLimiter(max_concurrency=config.max_concurrency)
        self._owns_limiter = owns_limiter or limiter is None
        self._owns_client = client is None
        headers = {"Authorization": f"Bearer {config.api_key}"} if config.api_key else {}
        self._client = client or httpx.AsyncClient(
            base_url=config.base_url,
            headers=headers,
            timeout=httpx.Timeout(self.attempt_timeout_s, pool=None),
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=64),
        )
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._model = config.model
        self._start_error: str | None = None
        self._tokenizer_looked = False
        self._closed = False

    @property
    def sequence_scoring(self) -> bool:
        """True when multi-token candidates are teacher-forced (a tokenizer is known and the
        server takes token-id prompts with echoed log-probabilities: vLLM, SGLang)."""
        return (
            self._tokenizer is not None
            and self.compat != "openai"
            and self.config.choice_mode != "verdict"
        )

    @property
    def started(self) -> bool:
        """False until the served model is known (configured, or found by :meth:`start`)."""
        return bool(self._model)

    async def start(self) -> None:
        """With no configured model, use the one the server lists at ``GET /models``; with
        no tokenizer given, use the served model's directory when it exists on this machine.

        vLLM and llama.cpp's server serve one model, so the judge works with just the URL.
        Raises ``RuntimeError`` when the server is unreachable or lists no model.
        """
        if not self._model:
            await self._find_model()
        if self._tokenizer is None and not self._tokenizer_looked and self.compat != "openai":
            self._tokenizer_looked = True
            self._tokenizer = await self._local_tokenizer()

    async def _find_model(self) -> None:
        try:
            served = [card["id"] for card in await self._model_cards()]
        except RuntimeError as exc:
            self._start_error = str(exc)
            raise
        self._start_error = None
        if len(served) > 1:
            logger.warning(
                "%s serves %d models; judging with %s", self.config.base_url, len(served), served[0]
            )
        self._model = served[0]

    async def _local_tokenizer(self) -> ChatTokenizer | None:
        """The tokenizer in the directory vLLM reports as the model's ``root``, when that
        directory is on this machine (the same host, or a shared volume); else None."""
        try:
            cards = await self._model_cards()
        except RuntimeError:
            return None
        root = next((c.get("root") for c in cards if c["id"] == self._model), None)
        if not isinstance(root, str) or not local_tokenizer_dir(root):
            return None
        try:
            return await asyncio.to_thread(ChatTokenizer.load, root)
        except (OSError, ValueError) as exc:
            logger.warning("could not load the tokenizer in %s: %s", root, exc)
            return None

    async def _model_cards(self) -> list[dict[str, Any]]:
        try:
            response = await self._client.get("models")
            response.raise_for_status()
            cards = [dict(m, id=str(m["id"])) for m in response.json().get("data", [])]
        except (httpx.HTTPError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise RuntimeError(
                f"could not list the models of {self.config.base_url}: {exc}"
            ) from exc
        if not cards:
            raise RuntimeError(f"{self.config.base_url} serves no model")
        return cards

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
        """Backend name, model id, whether choices are asked for as logprobs, and how:
        ``choice_scoring`` is ``sequence`` (every candidate's full token sequence) or
        ``first_token`` (candidates read from the first token's list)."""
        details = {
            "base_url": self.config.base_url,
            "choice_mode": self.config.choice_mode,
            "compat": self.compat,
            "choice_scoring": "sequence" if self.sequence_scoring else "first_token",
        }
        logprobs = self.config.choice_mode != "verdict"
        return BackendInfo(BACKEND_NAME, self._model, logprobs, details)

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
        """Score every request; one result per request, in order.

        Requests whose candidates are not all single distinct tokens go to the server as one
        batched teacher-forcing call when :attr:`sequence_scoring` is on; the others are
        scored concurrently from the first token's logprobs.
        """
        if problem := await self._missing_model():
            return [ChoiceResult.failed("error", problem) for _ in requests]
        results: list[ChoiceResult | None] = [None] * len(requests)
        forced: list[tuple[int, ForcedRows]] = []
        for index, request in enumerate(requests):
            rows = self._forced(request)
            if isinstance(rows, ChoiceResult):
                results[index] = rows
            elif rows is not None:
                forced.append((index, rows))
        sequenced = {index for index, _ in forced}
        first_token = [i for i, r in enumerate(results) if r is None and i not in sequenced]
        items = (
            self._guard(self._score_one(requests[i]), ChoiceResult.failed) for i in first_token
        )
        sequences = self._guard(self._score_forced(requests, forced), _failed_all(len(forced)))
        by_token, by_sequence = await asyncio.gather(asyncio.gather(*items), sequences)
        for index, result in zip(first_token, by_token, strict=True):
            results[index] = result
        for (index, _), result in zip(forced, by_sequence, strict=True):
            results[index] = result
        return [r if r is not None else ChoiceResult.failed("error", "not scored") for r in results]

    def _forced(self, request: ChoiceRequest) -> ForcedRows | ChoiceResult | None:
        """The request's teacher-forcing rows; None when its first token decides (every
        candidate one distinct token) or sequence scoring is off."""
        if self._tokenizer is None or not self.sequence_scoring:
            return None
        rows = forced_rows(self._tokenizer, request)
        if isinstance(rows, ForcedRows) and all(t == 1 for t in rows.tails):
            return None
        return rows

    async def _score_forced(
        self, requests: Sequence[ChoiceRequest], forced: Sequence[tuple[int, ForcedRows]]
    ) -> list[ChoiceResult]:
        """Every forced request, ``MAX_PROMPTS_PER_CALL`` rows a call at most."""
        chunks: list[list[tuple[int, ForcedRows]]] = [[]]
        for item in forced:
            if chunks[-1] and sum(len(f.rows) for _, f in chunks[-1]) + len(item[1].rows) > (
                MAX_PROMPTS_PER_CALL
            ):
                chunks.append([])
            chunks[-1].append(item)
        done = await asyncio.gather(
            *(self._score_chunk([requests[i] for i, _ in c], [f for _, f in c]) for c in chunks)
        )
        return [result for chunk in done for result in chunk]

    async def _score_chunk(
        self, requests: Sequence[ChoiceRequest], forced: Sequence[ForcedRows]
    ) -> list[ChoiceResult]:
        if not forced:
            return []
        rows = [row for f in forced for row in f.rows]
        tails = [tail for f in forced for tail in f.tails]
        body = completions_body(self._model, rows, self.config.extra_body)
        reply = await self._send(body, _COMPLETIONS)
        if reply.body is None:
            if reply.status == "invalid" and len(forced) > 1:  # find the one that is too long
                singles = [
                    self._score_chunk([r], [f]) for r, f in zip(requests, forced, strict=True)
                ]
                return [result for [result] in await asyncio.gather(*singles)]
            return [ChoiceResult.failed(reply.status, reply.error) for _ in forced]
        sums = tail_logprobs(reply.body, rows, tails)
        if isinstance(sums, str):
            return list(await asyncio.gather(*(self._without_logprobs(r, sums) for r in requests)))
        out, start = [], 0
        for request, f in zip(requests, forced, strict=True):
            out.append(
                ChoiceResult.from_logprobs(request.candidates, sums[start : start + len(f.rows)])
            )
            start += len(f.rows)
        return out

    async def _without_logprobs(self, request: ChoiceRequest, why: str) -> ChoiceResult:
        """This call got no logprobs: a parsed verdict for it (``auto``), or an error."""
        if self.config.choice_mode == "logprobs":
            return ChoiceResult.failed("error", f"no logprobs from the server: {why}")
        logger.debug(
            "%s gave no logprobs (%s); this item uses a verdict", self.config.base_url, why
        )
        return await self._score_by_verdict(request)

    async def generate(self, requests: Sequence[GenerateRequest]) -> list[GenerateResult]:
        """Generate every reply concurrently; one result per request, in order."""
        if problem := await self._missing_model():
            return [GenerateResult.failed("error", problem) for _ in requests]
        items = (self._guard(self._generate_one(r), GenerateResult.failed) for r in requests)
        return list(await asyncio.gather(*items))

    @staticmethod
    async def _guard(work: Awaitable[T], failed: Callable[[ItemStatus, str], T]) -> T:
        try:
            return await work
        except Exception as exc:  # one item never sinks the batch
            logger.exception("judge item failed")
            return failed("error", f"{type(exc).__name__}: {exc}")

    async def _score_one(self, request: ChoiceRequest) -> ChoiceResult:
        problem = validate_choice(request)
        if problem:
            return ChoiceResult.failed("invalid", problem)
        if self.config.choice_mode == "verdict":
            return await self._score_by_verdict(request)
        return await self._score_by_logprobs(request)

    async def _score_by_logprobs(self, request: ChoiceRequest) -> ChoiceResult:
        """The candidates from the first token's list; a reply without logprobs makes this
        call (only) a parsed verdict, never the calls after it (issue 19)."""
        body = self._chat_body(request.messages, request.assistant_prefix, 1, 0.0)
        body.update(logprobs=True, top_logprobs=self.config.top_logprobs)
        reply = await self._send(body)
        if reply.body is None:
            if reply.http_status == 400 and "logprob" in reply.error.lower():
                return await self._without_logprobs(request, reply.error)
            return ChoiceResult.failed(reply.status, reply.error)
        listed = _first_token_logprobs(reply.body)
        if not listed:
            return await self._without_logprobs(request, "the response has no logprobs")
        if self._tokenizer is not None and self.sequence_scoring and _unlisted(request, listed):
            # A floor value is only a bound: score the candidates exactly instead.
            rows = forced_rows(self._tokenizer, request)
            if isinstance(rows, ForcedRows):
                [exact] = await self._score_chunk([request], [rows])
                return exact
        return choice_from_listed(request.candidates, listed)

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
        # OpenAI's reasoning models refuse max_tokens; vLLM and SGLang take max_tokens.
        body["max_completion_tokens" if self.compat == "openai" else "max_tokens"] = max_tokens
        body["temperature"] = temperature
        if prefix:
            turns.append({"role": "assistant", "content": prefix})
            if self.config.prefill and self.compat != "openai":  # vLLM/SGLang-only fields
                body.update(continue_final_message=True, add_generation_prompt=False)
        body["messages"] = turns
        return body

    async def _send(self, body: dict[str, Any], path: str = _CHAT) -> _Reply:
        """One request with retries; never raises for HTTP or transport failures.

        Each attempt is bounded by ``attempt_timeout_s``; retries stop when the next attempt
        could not finish before ``config.timeout_s`` (the whole call's deadline) runs out.
        """
        retry = self.config.retry
        deadline = time.monotonic() + self.config.timeout_s
        attempt = 0
        while True:
            reply = await self._attempt(body, path, deadline - time.monotonic())
            if not reply.retryable or attempt >= retry.max_retries:
                return reply
            delay = retry.delay(attempt, reply.retry_after, self._rng)
            if time.monotonic() + delay >= deadline:
                return reply
            attempt += 1
            logger.warning(
                "retry %d/%d in %.2fs: %s", attempt, retry.max_retries, delay, reply.error
            )
            await self._sleep(delay)

    async def _attempt(self, body: dict[str, Any], path: str, left_s: float) -> _Reply:
        limit = max(0.001, min(self.attempt_timeout_s, left_s))
        try:
            # httpx bounds each phase; asyncio.timeout bounds the whole attempt.
            async with self._limiter.acquire(), asyncio.timeout(limit):
                response = await self._client.post(path, json=body)
        except (httpx.TimeoutException, TimeoutError) as exc:
            why = f"{type(exc).__name__}: no answer within {limit:.3g}s"
            return _Reply(status="timeout", error=why, retryable=True)
        except (httpx.TransportError, LimiterUnavailable) as exc:
            return _Reply(status="error", error=f"{type(exc).__name__}: {exc}", retryable=True)
        except httpx.HTTPError as exc:
            return _Reply(status="error", error=f"{type(exc).__name__}: {exc}")
        return _reply_from(response)


def default_attempt_timeout(config: OpenAIConfig) -> float:
    """A per-attempt timeout that leaves room for retries within ``config.timeout_s``: the
    deadline shared by every attempt (issue 19: when both were 300 s no retry could happen).

    >>> default_attempt_timeout(OpenAIConfig("http://x/v1", "m", timeout_s=300.0))
    75.0
    """
    return config.timeout_s / (config.retry.max_retries + 1)


def _failed_all(count: int) -> Callable[[ItemStatus, str], list[ChoiceResult]]:
    def failed(status: ItemStatus, error: str) -> list[ChoiceResult]:
        return [ChoiceResult.failed(status, error) for _ in range(count)]

    return failed


def _reply_from(response: httpx.Response) -> _Reply:
    code = response.status_code
    if 200 <= code < 300:
        with contextlib.suppress(ValueError):
            body = response.json()
            if isinstance(body, dict):
                return _Reply(body=body)
        return _Reply(status="error", error="the server answered with no JSON object")
    message = _server_message(response)
    too_long = code == 400 and any(p in message.lower() for p in _TOO_LONG)
    return _Reply(
        status="timeout" if code in (408, 504) else "invalid" if too_long else "error",
        error=f"HTTP {code}: {message}",
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


def _unlisted(request: ChoiceRequest, listed: Sequence[tuple[str, float]]) -> bool:
    """True when some candidate is missing from the first token's list."""
    found = {token.lstrip(_LEADING) for token, _ in listed}
    return any(c.lstrip(_LEADING) not in found for c in request.candidates)


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
