"""The judge backend contract: typed batched requests, per-item results, a Protocol.

A backend answers two batched questions about a chat prompt:

* ``score_choices``: how likely is each candidate continuation (``"A"`` vs ``"B"``,
  ``"1"`` .. ``"10"``) as the first thing the assistant says?
* ``generate``: what does the assistant say?

Every call returns one result per request, in request order. A bad item never raises:
its result carries ``status != "ok"`` and an ``error`` message, and the other items of
the batch are still answered.

Example::

    backend: JudgeBackend = ...
    await backend.start()
    [res] = await backend.score_choices(
        [ChoiceRequest(messages=[user("Which is better, A or B?")], candidates=["A", "B"])]
    )
    if res.ok:
        p_a = res.probs[0]
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypedDict, runtime_checkable

from judges.lifecycle import Lifecycle

ItemStatus = Literal["ok", "invalid", "error", "timeout"]
"""Per-item outcome.

``invalid``: the request itself cannot be served (no candidates, duplicate candidates,
prompt longer than the backend's limit, unknown role). ``error``: the backend failed
on this item. ``timeout``: the batch did not finish within the backend's time limit.
"""

FinishReason = Literal["stop", "length"]
"""Why generation ended: an end-of-turn token (``stop``) or ``max_new_tokens`` (``length``)."""

Role = Literal["system", "user", "assistant"]
ROLES: frozenset[str] = frozenset({"system", "user", "assistant"})
MAX_SAMPLES = 16
"""The most samples (``n``) one generate request may ask for."""


class ChatMessage(TypedDict):
    """One chat turn, in the OpenAI/transformers shape ``{"role": ..., "content": ...}``."""

    role: Role
    content: str


def user(content: str) -> ChatMessage:
    """Build a user turn: ``user("hi") == {"role": "user", "content": "hi"}``."""
    return {"role": "user", "content": content}


def system(content: str) -> ChatMessage:
    """Build a system turn."""
    return {"role": "system", "content": content}


@dataclass(frozen=True, slots=True)
class ChoiceRequest:
    """Score ``candidates`` as the start of the assistant's reply to ``messages``.

    ``assistant_prefix`` is text the assistant turn is forced to begin with before the
    candidate (for example ``"Verdict: "``). Candidates are tokenized on their own, so a
    prefix should not end in whitespace that the tokenizer would merge into the candidate.
    """

    messages: Sequence[ChatMessage]
    candidates: Sequence[str]
    assistant_prefix: str = ""


@dataclass(frozen=True, slots=True)
class ChoiceResult:
    """Log-probabilities of each candidate, aligned with ``ChoiceRequest.candidates``.

    ``logprobs[i]`` is the model's log-probability of candidate ``i`` (summed over its
    tokens). ``probs`` renormalizes over the candidates only, so it sums to 1 even when
    the model puts mass elsewhere; ``coverage`` is the total probability the model gave
    to the candidates (``exp(logsumexp(logprobs))``), a cheap "did it understand the
    format" signal. On failure ``logprobs`` and ``probs`` are empty.
    """

    status: ItemStatus
    candidates: tuple[str, ...] = ()
    logprobs: tuple[float, ...] = ()
    probs: tuple[float, ...] = ()
    coverage: float | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        """True when the item was scored."""
        return self.status == "ok"

    def best(self) -> str | None:
        """The most probable candidate, or None when the item failed."""
        if not self.ok or not self.probs:
            return None
        return self.candidates[max(range(len(self.probs)), key=self.probs.__getitem__)]

    @classmethod
    def from_logprobs(
        cls, candidates: Sequence[str], logprobs: Sequence[float], coverage: float | None = None
    ) -> ChoiceResult:
        """Build an ``ok`` result, normalizing ``logprobs`` over the candidates. ``coverage``
        defaults to the probability ``logprobs`` sum to (at most 1)."""
        top = max(logprobs)
        # The sum is NaN or +inf exactly when some value is NaN or +inf (-inf is allowed, but
        # not for all of them); one C-level pass, as this runs for every judged prompt.
        summed = sum(logprobs)
        if not (math.isfinite(summed) or summed == -math.inf) or top == -math.inf:
            return cls.failed("error", "candidate log-probabilities are not finite")
        weights = [math.exp(lp - top) for lp in logprobs]
        total = sum(weights)
        return cls(
            status="ok",
            candidates=tuple(candidates),
            logprobs=tuple(map(float, logprobs)),
            probs=tuple([w / total for w in weights]),
            coverage=min(1.0, math.exp(top) * total if coverage is None else coverage),
        )

    @classmethod
    def failed(cls, status: ItemStatus, error: str) -> ChoiceResult:
        """Build a failed result."""
        return cls(status=status, error=error)


@dataclass(frozen=True, slots=True)
class GenerateRequest:
    """Generate the assistant's reply to ``messages``.

    ``temperature == 0`` is greedy decoding. With ``temperature > 0`` a ``seed`` makes
    the sample reproducible for this item regardless of what else is in the batch;
    ``top_p < 1`` samples from the smallest set of tokens holding that much probability.
    ``stop``: the reply ends just before the first of these strings (which is dropped).
    ``n``: how many samples to draw (sample ``k`` uses ``seed + k``). ``json_schema``: a
    JSON schema the reply must follow; backends enforce it while decoding where they can
    (see :mod:`judges.generation`, which also validates what comes back).
    """

    messages: Sequence[ChatMessage]
    max_new_tokens: int = 256
    temperature: float = 0.0
    seed: int | None = None
    top_p: float = 1.0
    stop: Sequence[str] = ()
    n: int = 1
    json_schema: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class GeneratedText:
    """One sample of a reply: its text (special tokens removed) and token count."""

    text: str
    num_tokens: int = 0
    finish_reason: FinishReason | None = None


@dataclass(frozen=True, slots=True)
class GenerateResult:
    """The generated text (special tokens removed) with its token count.

    ``text``, ``num_tokens`` and ``finish_reason`` describe the first sample; ``samples``
    holds all ``n`` of them (see :meth:`all_samples`).
    """

    status: ItemStatus
    text: str = ""
    num_tokens: int = 0
    finish_reason: FinishReason | None = None
    error: str | None = None
    samples: tuple[GeneratedText, ...] = ()

    @property
    def ok(self) -> bool:
        """True when the item was generated."""
        return self.status == "ok"

    def all_samples(self) -> tuple[GeneratedText, ...]:
        """Every sample; a result built with only ``text`` has that one."""
        if self.samples or not self.ok:
            return self.samples
        return (GeneratedText(self.text, self.num_tokens, self.finish_reason),)

    @classmethod
    def of(cls, samples: Sequence[GeneratedText]) -> GenerateResult:
        """An ``ok`` result holding ``samples`` (at least one)."""
        first = samples[0]
        return cls("ok", first.text, first.num_tokens, first.finish_reason, None, tuple(samples))

    @classmethod
    def failed(cls, status: ItemStatus, error: str) -> GenerateResult:
        """Build a failed result."""
        return cls(status=status, error=error)


@dataclass(frozen=True, slots=True)
class BackendInfo:
    """What a backend is: its implementation name and the model it serves."""

    name: str
    model_id: str
    supports_logprobs: bool = True
    details: dict[str, str] = field(default_factory=dict)


@runtime_checkable
class JudgeBackend(Lifecycle, Protocol):
    """A batched, async judge model. Implementations never raise for a single bad item.

    Lifecycle (from :class:`~judges.lifecycle.Lifecycle`): ``start()`` loads the model or
    finds the served one (the app's lifespan calls it in the background; a request before
    it starts the backend too), ``readiness`` reports ``ready`` or why not (``loading``,
    ``failed`` with the reason), ``aclose()`` releases everything. A backend whose model is
    unavailable answers every item with status ``error`` and the reason.
    """

    @property
    def info(self) -> BackendInfo:
        """Backend name and model id."""
        ...

    async def score_choices(self, requests: Sequence[ChoiceRequest]) -> list[ChoiceResult]:
        """Score each request's candidates; one result per request, in order."""
        ...

    async def generate(self, requests: Sequence[GenerateRequest]) -> list[GenerateResult]:
        """Generate a reply for each request; one result per request, in order."""
        ...


def validate_messages(messages: Sequence[ChatMessage]) -> str | None:
    """Return why ``messages`` is not a usable chat prompt, or None when it is."""
    if not messages:
        return "messages must not be empty"
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or set(message) != {"role", "content"}:
            return f"message {i} must have exactly the keys 'role' and 'content'"
        if message["role"] not in ROLES:
            return f"message {i} has unknown role {message['role']!r}"
        if not isinstance(message["content"], str):
            return f"message {i} content must be a string"
    return None


def validate_choice(request: ChoiceRequest) -> str | None:
    """Return why a choice request is invalid, or None."""
    problem = validate_messages(request.messages)
    if problem:
        return problem
    if not request.candidates:
        return "candidates must not be empty"
    if any(not isinstance(c, str) or not c for c in request.candidates):
        return "candidates must be non-empty strings"
    if len(set(request.candidates)) != len(request.candidates):
        return "candidates must be distinct"
    return None


def validate_generate(request: GenerateRequest) -> str | None:
    """Return why a generate request is invalid, or None."""
    problem = validate_messages(request.messages)
    if problem:
        return problem
    if request.max_new_tokens < 1:
        return "max_new_tokens must be at least 1"
    if not math.isfinite(request.temperature) or request.temperature < 0:
        return "temperature must be a finite number >= 0"
    if not math.isfinite(request.top_p) or not 0 < request.top_p <= 1:
        return "top_p must be in (0, 1]"
    if not 1 <= request.n <= MAX_SAMPLES:
        return f"n must be from 1 to {MAX_SAMPLES}"
    if isinstance(request.stop, str) or any(not isinstance(s, str) or not s for s in request.stop):
        return "stop must be a list of non-empty strings"
    if request.json_schema is not None and not isinstance(request.json_schema, Mapping):
        return "json_schema must be a JSON object"
    return None
