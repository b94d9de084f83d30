"""Reading an OpenAI-compatible server's replies: errors, first-token lists, verdicts.

Pure functions over response bodies, used by :mod:`judges.backends.openai_backend` (see its
docstring for the choice-scoring rules they implement).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from judges.backends.base import (
    ChoiceResult,
    GeneratedText,
    GenerateRequest,
    GenerateResult,
    ItemStatus,
)
from judges.backends.http_transport import HttpReply
from judges.parsing import parse_pairwise_verdict, parse_scale_grade
from plaudit_wire.retry import parse_retry_after

VERDICT_FLOOR_LOGPROB = -100.0
"""The logprob a verdict result gives a candidate that was not chosen (``log(0)`` clamped)."""
_LEADING = " \t\n\r\u0120\u2581"  # whitespace, and the GPT-2 / SentencePiece space markers
#: Phrases of an HTTP 400 that blames the input's length (vLLM, SGLang, OpenAI): the caller's
#: data, an ``invalid`` item (a 422), never a retried outage (issue 19).
_TOO_LONG = ("maximum context length", "context length", "too long", "context_length_exceeded")


@dataclass(frozen=True, slots=True)
class Reply:
    body: dict[str, Any] | None = None
    status: ItemStatus = "ok"
    error: str = ""
    http_status: int | None = None
    retryable: bool = False
    retry_after: float | None = None


def is_verdict(result: ChoiceResult) -> bool:
    """True when an ``ok`` result came from a parsed verdict rather than logprobs."""
    return result.ok and result.coverage is None


def reply_from(response: HttpReply) -> Reply:
    code = response.status_code
    if 200 <= code < 300:
        with contextlib.suppress(ValueError):
            body = response.json()
            if isinstance(body, dict):
                return Reply(body=body)
        return Reply(status="error", error="the server answered with no JSON object")
    message = _server_message(response)
    too_long = code == 400 and any(p in message.lower() for p in _TOO_LONG)
    return Reply(
        status="timeout" if code in (408, 504) else "invalid" if too_long else "error",
        error=f"HTTP {code}: {message}",
        http_status=code,
        retryable=code in (408, 429) or code >= 500,
        retry_after=parse_retry_after(response.headers.get("retry-after")),
    )


def _server_message(response: HttpReply) -> str:
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


def first_token_logprobs(body: Mapping[str, Any]) -> dict[str, float]:
    """Token -> logprob for the first generated token: its tops, and the sampled one."""
    try:
        first = body["choices"][0]["logprobs"]["content"][0]
        listed: dict[str, float] = {}
        for entry in [*(first.get("top_logprobs") or []), first]:  # sampled is usually a top
            listed.setdefault(str(entry["token"]), float(entry["logprob"]))
        return listed
    except (KeyError, IndexError, TypeError, ValueError, AttributeError):
        return {}


def choice_from_listed(candidates: Sequence[str], listed: Mapping[str, float]) -> ChoiceResult:
    """Score candidates from the token -> logprob list a server gave (see above).

    >>> choice_from_listed(["A", "B"], {" A": -0.1, "B": -2.5, "The": -4.0}).best()
    'A'
    """
    return _scored(candidates, listed, missing_ok=True) or ChoiceResult.failed(
        "error", "the server listed no tokens"
    )


def listed_choice(candidates: Sequence[str], listed: Mapping[str, float]) -> ChoiceResult | None:
    """:func:`choice_from_listed`, or None when some candidate is not in the list (the
    caller then scores it another way). One pass over the list serves both questions: a
    G=8 group reads 56 such lists per reply (issue 19)."""
    return _scored(candidates, listed, missing_ok=False)


def _scored(
    candidates: Sequence[str], listed: Mapping[str, float], *, missing_ok: bool
) -> ChoiceResult | None:
    if not listed:
        return None
    keys = [c.lstrip(_LEADING) for c in candidates]
    found: dict[str, list[float]] = {key: [] for key in keys}
    for token, logprob in listed.items():
        hits = found.get(token.lstrip(_LEADING))
        if hits is not None:
            hits.append(logprob)
    floor: float | None = None
    logprobs: list[float] = []
    coverage = 0.0
    for key in keys:
        hits = found[key]
        if not hits:
            if not missing_ok:
                return None
            if floor is None:  # the lowest listed value (NaN or +inf fail the item below)
                floor = min(listed.values())
            logprobs.append(floor)
            continue
        value = hits[0] if len(hits) == 1 else _logsumexp(hits)
        logprobs.append(value)
        coverage += math.exp(value)
    return ChoiceResult.from_logprobs(candidates, logprobs, coverage)


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


def message_text(body: Mapping[str, Any]) -> str | None:
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


def generate_result(body: Mapping[str, Any], n: int = 1) -> GenerateResult:
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
