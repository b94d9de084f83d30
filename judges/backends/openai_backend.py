"""A judge backend over any OpenAI-compatible server (vLLM, SGLang, llama.cpp, hosted APIs).

Every HTTP attempt is bounded by a :class:`~judges.limits.Limiter` and by
``attempt_timeout_s`` (default: half of ``config.timeout_s``), and all attempts of
one call share ``config.timeout_s`` as their deadline, so a retry can follow a timeout.
Connect errors, timeouts, 408, 429 and 5xx are retried with jittered exponential backoff that
honours ``Retry-After``; other 4xx are not. An HTTP 400 that blames the input's length
(vLLM's "maximum context length") is an ``invalid`` item: the caller's data, a 422 at the
service, never an outage. A failed item gets status ``invalid``, ``timeout`` or ``error``, and
never raises.

``compat`` says which fields the server takes: ``vllm``/``sglang`` take
``continue_final_message`` (an assistant prefix is sent as a final assistant turn), token-id
prompts in lists on ``/v1/completions`` and ``max_tokens``; ``openai`` gets none of those and
``max_completion_tokens`` (OpenAI's reasoning models refuse ``max_tokens``).

Choice scoring (``choice_mode="auto"``), two ways, named in ``info.details["choice_scoring"]``:

* ``sequence``: the judge's tokenizer is known (given, or found in the directory vLLM reports
  as the model's ``root``) and ``compat`` is vllm/sglang. A whole batch goes to
  ``/v1/completions`` as lists of token-id prompts built exactly as the local backend builds
  them (:mod:`judges.backends.sequence_scoring`): requests whose candidates are single
  distinct tokens in one call that lists each prompt's next tokens, the others (a grade "10"
  is two tokens for SmolLM2 and Qwen) and any with an unlisted candidate teacher-forced with
  echoed logprobs in one more. A G=8 round-robin tournament is one call (issue 19).
* ``first_token``: one chat call per item, ``logprobs: true, top_logprobs: 20`` and
  ``max_tokens: 1``; candidates are read from the first token's list. A token matches a
  candidate when both are equal after stripping leading whitespace and ``Ġ``/``▁``; matching
  tokens (``"A"``, ``" A"``) are summed. An unlisted candidate gets the *floor*: the lowest
  listed logprob, an upper bound on its true one; ``coverage`` counts listed candidates only.
  Only single-token candidates are exact this way.

A reply without logprobs (null, absent, or a 400 that mentions them) makes that item, in that
call only, a generated verdict parsed with :mod:`judges.parsing` (issue 19: it used to switch
the whole process to verdicts for good). ``"logprobs"`` mode never falls back (an ``error``
instead); ``"verdict"`` always generates a short reply. A verdict result has
``coverage=None`` (:func:`is_verdict`), ``probs`` 1.0 for the parsed candidate (0.5/0.5 for a
pairwise tie) and ``logprobs = log(probs)``, ``log(0)`` clamped to ``VERDICT_FLOOR_LOGPROB``.

Example::

    config = OpenAIConfig("http://127.0.0.1:8000/v1", model="judge")
    async with OpenAIBackend(config) as backend:
        [res] = await backend.score_choices([ChoiceRequest([user("A or B?")], ["A", "B"])])
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar, cast

from judges.backends.base import (
    BackendInfo,
    ChatMessage,
    ChoiceRequest,
    ChoiceResult,
    GenerateRequest,
    GenerateResult,
    ItemStatus,
    validate_choice,
    validate_generate,
)
from judges.backends.http_transport import (
    HttpClient,
    HttpTransport,
    TransportFailure,
    TransportTimeout,
    make_transport,
)
from judges.backends.openai_replies import (
    VERDICT_FLOOR_LOGPROB,
    Reply,
    choice_from_listed,
    first_token_logprobs,
    generate_result,
    generation_fields,
    is_verdict,
    listed_choice,
    message_text,
    reply_from,
    verdict_result,
)
from judges.backends.sequence_scoring import (
    ChatTokenizer,
    ForcedRows,
    completions_body,
    forced_rows,
    local_tokenizer_dir,
    next_token_body,
    next_token_lists,
    tail_logprobs,
)
from judges.lifecycle import READY, Readiness
from judges.limits import InProcessLimiter, Limiter, LimiterUnavailable
from plaudit_wire.retry import Backoff

logger = logging.getLogger(__name__)

BACKEND_NAME = "openai-compatible"

ChoiceMode = Literal["auto", "logprobs", "verdict"]
Compat = Literal["vllm", "sglang", "openai"]
Sleep = Callable[[float], Awaitable[None]]
T = TypeVar("T")
X = TypeVar("X")
_CHAT = "chat/completions"
_COMPLETIONS = "completions"
MAX_PROMPTS_PER_CALL = 256
"""The most prompts one batched ``/v1/completions`` call carries."""


@dataclass(frozen=True, slots=True)
class OpenAIConfig:
    """Where the server is and how to talk to it.

    ``base_url`` is the OpenAI root with ``/v1``, as for the OpenAI SDK. ``timeout_s`` is one
    call's deadline, retries included (each attempt: the backend's ``attempt_timeout_s``);
    ``max_concurrency`` sizes the default in-process limiter; ``extra_body`` is merged into
    every request body (``chat_template_kwargs``, ...); ``http_client`` picks the HTTP library
    (:mod:`judges.backends.http_transport`).
    Example: ``OpenAIConfig("http://vllm:8000/v1", model="Qwen/Qwen2.5-7B-Instruct")``.
    """

    base_url: str
    model: str
    api_key: str | None = field(default=None, repr=False)
    timeout_s: float = 60.0
    retry: Backoff = field(default_factory=Backoff)
    choice_mode: ChoiceMode = "auto"
    top_logprobs: int = 20
    verdict_max_tokens: int = 32
    prefill: bool = True
    max_concurrency: int = 256
    extra_body: Mapping[str, Any] = field(default_factory=dict)
    http_client: HttpClient = "aiohttp"


class OpenAIBackend:
    """:class:`~judges.backends.base.JudgeBackend` over an OpenAI-compatible HTTP server.

    ``limiter`` defaults to an in-process one with ``config.max_concurrency`` slots; a
    ``limiter`` passed in is the caller's to close unless ``owns_limiter`` hands it over (a
    :class:`~judges.limits.RedisLimiter` built for this backend holds a Redis connection);
    a ``transport`` passed in is the caller's to close; ``sleep`` waits out the backoff
    (``config.retry``'s ``jitter`` draws it).
    """

    def __init__(
        self,
        config: OpenAIConfig,
        *,
        limiter: Limiter | None = None,
        owns_limiter: bool = False,
        transport: HttpTransport | None = None,
        sleep: Sleep = asyncio.sleep,
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
        self._owns_transport = transport is None
        headers = {"Authorization": f"Bearer {config.api_key}"} if config.api_key else {}
        self._transport = transport or make_transport(
            config.http_client, config.base_url, headers=headers, timeout_s=self.attempt_timeout_s
        )
        self._sleep = sleep
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
            response = await self._transport.get("models")
            if response.status_code >= 400:
                raise ValueError(f"HTTP {response.status_code}")
            cards = [dict(m, id=str(m["id"])) for m in response.json().get("data", [])]
        except (TransportFailure, ValueError, KeyError, TypeError, AttributeError) as exc:
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
        if self._owns_transport:
            await self._transport.aclose()
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

        With :attr:`sequence_scoring` on, the batch goes to ``/v1/completions`` as a few
        calls with lists of token-id prompts (see :meth:`_score_batched`); otherwise each
        request is one chat call, scored from the first token's list.
        """
        if problem := await self._missing_model():
            return [ChoiceResult.failed("error", problem) for _ in requests]
        if self._tokenizer is not None and self.sequence_scoring:
            return await self._score_batched(self._tokenizer, requests)
        return await _together(
            self._guard(self._score_one(r), ChoiceResult.failed) for r in requests
        )

    async def _score_batched(
        self, tokenizer: ChatTokenizer, requests: Sequence[ChoiceRequest]
    ) -> list[ChoiceResult]:
        """Requests whose candidates are single distinct tokens: one call listing every
        prompt's next tokens; the others, and any whose candidate was not listed, are
        teacher-forced in one more call (issue 19: a G=8 tournament was 56 calls)."""
        results: list[ChoiceResult | None] = [None] * len(requests)
        single: list[int] = []
        forced: list[tuple[int, ForcedRows]] = []
        for index, request in enumerate(requests):
            tails = None if validate_choice(request) else tokenizer.tails(request.candidates)
            if tails is not None and all(len(t) == 1 for t in tails):
                single.append(index)  # its prompt ids are only needed if it is forced later
                continue
            rows = forced_rows(tokenizer, request)
            if isinstance(rows, ChoiceResult):
                results[index] = rows
            else:
                forced.append((index, rows))
        next_tokens = self._guard(
            self._score_next_tokens(tokenizer, [requests[i] for i in single]),
            _failed_all(len(single)),
        )
        by_sequence: list[ChoiceResult] = []
        if forced:
            listed, by_sequence = await asyncio.gather(
                next_tokens,
                self._guard(self._score_forced(requests, forced), _failed_all(len(forced))),
            )
        else:  # the usual case: no task for an empty call
            listed = await next_tokens
        again = [
            (index, cast(ForcedRows, forced_rows(tokenizer, requests[index])))
            for index, result in zip(single, listed, strict=True)
            if result is None
        ]
        rescored: list[ChoiceResult] = []
        if again:
            rescored = await self._guard(
                self._score_forced(requests, again), _failed_all(len(again))
            )
        answered: list[tuple[int, ChoiceResult | None]] = list(zip(single, listed, strict=True))
        answered += [(index, r) for (index, _), r in zip(forced, by_sequence, strict=True)]
        answered += [(index, r) for (index, _), r in zip(again, rescored, strict=True)]
        for index, result in answered:
            if result is not None:
                results[index] = result
        return [r if r is not None else ChoiceResult.failed("error", "not scored") for r in results]

    async def _score_next_tokens(
        self, tokenizer: ChatTokenizer, requests: Sequence[ChoiceRequest]
    ) -> list[ChoiceResult | None]:
        """Each request's candidates from its prompt's next-token list; None where a
        candidate is not listed (a floor would only bound it: it is teacher-forced instead)."""
        chunks = _chunks(list(requests), lambda _: 1)
        done = await _together(self._next_token_chunk(tokenizer, c) for c in chunks)
        return [result for chunk in done for result in chunk]

    def _next_token_prompt(self, tokenizer: ChatTokenizer, request: ChoiceRequest) -> Any:
        """vLLM takes the rendered text and tokenizes it on its own cores (the tokenizing
        cost Plaudit's CPU per call was spent on: BENCHMARKS.md, issue 19); other servers get
        the ids."""
        if self.compat == "vllm":
            return tokenizer.prompt_text(request.messages, request.assistant_prefix)
        return tokenizer.prompt_ids(request.messages, request.assistant_prefix)

    async def _next_token_chunk(
        self, tokenizer: ChatTokenizer, requests: Sequence[ChoiceRequest]
    ) -> list[ChoiceResult | None]:
        if not requests:
            return []
        # Prompts in order, so those that share a head reach the prefix cache together.
        prompts = [self._next_token_prompt(tokenizer, r) for r in requests]
        order = sorted(range(len(prompts)), key=prompts.__getitem__)
        body = next_token_body(
            self._model,
            [prompts[i] for i in order],
            self.config.top_logprobs,
            self.config.extra_body,
        )
        reply = await self._send(body, _COMPLETIONS)
        if reply.body is None:
            if reply.status == "invalid" and len(requests) > 1:  # find the one that is too long
                singles = [self._next_token_chunk(tokenizer, [r]) for r in requests]
                return [result for [result] in await asyncio.gather(*singles)]
            return [ChoiceResult.failed(reply.status, reply.error) for _ in requests]
        lists = next_token_lists(reply.body, len(order))
        if isinstance(lists, str):
            return list(await asyncio.gather(*(self._without_logprobs(r, lists) for r in requests)))
        by_request = dict(zip(order, lists, strict=True))
        return [listed_choice(r.candidates, by_request[i]) for i, r in enumerate(requests)]

    async def _score_forced(
        self, requests: Sequence[ChoiceRequest], forced: Sequence[tuple[int, ForcedRows]]
    ) -> list[ChoiceResult]:
        """Every forced request, ``MAX_PROMPTS_PER_CALL`` rows a call at most."""
        chunks = _chunks(list(forced), lambda item: len(item[1].rows))
        done = await _together(
            self._score_chunk([requests[i] for i, _ in c], [f for _, f in c]) for c in chunks
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
        return await _together(items)

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
        listed = first_token_logprobs(reply.body)
        if not listed:
            return await self._without_logprobs(request, "the response has no logprobs")
        return choice_from_listed(request.candidates, listed)

    async def _score_by_verdict(self, request: ChoiceRequest) -> ChoiceResult:
        prefix, max_tokens = request.assistant_prefix, self.config.verdict_max_tokens
        reply = await self._send(self._chat_body(request.messages, prefix, max_tokens, 0.0))
        if reply.body is None:
            return ChoiceResult.failed(reply.status, reply.error)
        text = message_text(reply.body)
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
        return generate_result(reply.body, request.n)

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

    async def _send(self, body: dict[str, Any], path: str = _CHAT) -> Reply:
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
            delay = retry.delay(attempt, reply.retry_after)
            if time.monotonic() + delay >= deadline:
                return reply
            attempt += 1
            logger.warning(
                "retry %d/%d in %.2fs: %s", attempt, retry.max_retries, delay, reply.error
            )
            await self._sleep(delay)

    async def _attempt(self, body: dict[str, Any], path: str, left_s: float) -> Reply:
        limit = max(0.001, min(self.attempt_timeout_s, left_s))
        try:
            # The transport bounds the call; asyncio.timeout bounds the whole attempt.
            async with self._limiter.acquire(), asyncio.timeout(limit):
                response = await self._transport.post_json(path, body)
        except (TransportTimeout, TimeoutError) as exc:
            why = f"{type(exc).__name__}: no answer within {limit:.3g}s"
            return Reply(status="timeout", error=why, retryable=True)
        except (TransportFailure, LimiterUnavailable) as exc:
            return Reply(status="error", error=f"{type(exc).__name__}: {exc}", retryable=True)
        return reply_from(response)


def default_attempt_timeout(config: OpenAIConfig) -> float:
    """Half of ``config.timeout_s`` (the deadline every attempt of a call shares), so that one
    retry can follow a timed-out attempt (issue 19: when both were 300 s none could). Half,
    not a share per retry: a slow server's long generations must still fit in one attempt.

    >>> default_attempt_timeout(OpenAIConfig("http://x/v1", "m", timeout_s=300.0))
    150.0
    """
    return config.timeout_s / 2


def _chunks(items: list[X], weight: Callable[[X], int]) -> list[list[X]]:
    """``items`` cut into runs of at most ``MAX_PROMPTS_PER_CALL`` rows (an item heavier than
    that goes alone)."""
    chunks: list[list[X]] = [[]]
    load = 0
    for item in items:
        if chunks[-1] and load + weight(item) > MAX_PROMPTS_PER_CALL:
            chunks.append([])
            load = 0
        chunks[-1].append(item)
        load += weight(item)
    return chunks


async def _together(awaitables: Iterable[Awaitable[T]]) -> list[T]:
    """What ``asyncio.gather`` gives; a single awaitable is awaited in place, without the task
    gather wraps it in (a pairwise request, or a group of up to ``MAX_PROMPTS_PER_CALL``
    prompts, is one call: issue 19)."""
    items = list(awaitables)
    if len(items) == 1:
        return [await items[0]]
    return list(await asyncio.gather(*items))


def _failed_all(count: int) -> Callable[[ItemStatus, str], list[Any]]:
    def failed(status: ItemStatus, error: str) -> list[Any]:
        return [ChoiceResult.failed(status, error) for _ in range(count)]

    return failed


__all__ = [
    "BACKEND_NAME",
    "VERDICT_FLOOR_LOGPROB",
    "OpenAIBackend",
    "OpenAIConfig",
    "choice_from_listed",
    "generation_fields",
    "is_verdict",
    "verdict_result",
]
