"""Listwise group judging (issue 19): one call shows the judge the whole group and asks for a
score per completion, as OpenPipe ART's RULER does.

The question appears once; each completion sits in its own fence named by a short id
(``r1``, ``r2``, ...) and carrying the request's boundary code (:mod:`judges.fencing`). The
reply must follow :func:`listwise_schema`: ``{"scores": [{"id", "score"}, ...]}`` with exactly
one entry per completion and ids from the group (enforced while decoding where the backend
can, and validated again). A reply with a wrong count, an unknown, repeated or missing id is
asked again once, with the completions in reverse order (a different prompt, so a greedy
judge does not repeat itself, and the other order evens out position bias). After that, a
completion without a score gets ``unparseable``: never a silent 0.

A group costs one call (two when the reply had to be asked again), against G(G-1) calls for
a round-robin tournament judged in both orders.
"""

from __future__ import annotations

import json
import string
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from judges.backends.base import ChatMessage
from judges.fencing import neutralise
from judges.generation import GenerateFn, GenerationRequest, GenerationResult, Sampling, generate
from judges.templates import PromptTemplate
from plaudit_wire.judge import JudgeStamp, ListwiseResponse, ListwiseResult
from plaudit_wire.schemas import ItemStatus

DEFAULT_TEMPLATE = "listwise@1"
MAX_SCORE = 10
#: Reply budget per completion: ``{"id": "r1", "score": 10}, `` is about 15 SmolLM2 tokens
#: (measured: 91 tokens for six); a budget too small cuts every reply short.
TOKENS_PER_ITEM = 16


def reply_budget(count: int) -> int:
    """The default token budget of a reply scoring ``count`` completions.

    >>> reply_budget(6)
    112
    """
    return TOKENS_PER_ITEM * (count + 1)


def item_ids(count: int) -> list[str]:
    """The ids the judge sees: ``r1`` .. ``rN`` (client ids can be long or odd).

    >>> item_ids(3)
    ['r1', 'r2', 'r3']
    """
    return [f"r{i}" for i in range(1, count + 1)]


def listwise_schema(ids: Sequence[str]) -> dict[str, Any]:
    """The reply's JSON schema: one ``{"id", "score"}`` per id, scores 0..10."""
    entry = {
        "type": "object",
        "properties": {
            "id": {"type": "string", "enum": list(ids)},
            "score": {"type": "integer", "minimum": 0, "maximum": MAX_SCORE},
        },
        "required": ["id", "score"],
        "additionalProperties": False,
    }
    scores = {"type": "array", "items": entry, "minItems": len(ids), "maxItems": len(ids)}
    return {
        "type": "object",
        "properties": {"scores": scores},
        "required": ["scores"],
        "additionalProperties": False,
    }


def render(
    template: PromptTemplate,
    code: str,
    question: str,
    entries: Sequence[tuple[str, str]],
    criteria: str | None = None,
) -> list[ChatMessage]:
    """The chat messages for ``(id, text)`` entries, each text in its own fenced block."""
    fences = template.fences
    blocks = [
        f"<<response {rid} {code}>>\n"
        f"{neutralise(text, fences, code, untrusted=True)}\n"
        f"<</response {rid} {code}>>"
        for rid, text in entries
    ]
    values = {
        **template.defaults,
        "question": neutralise(question, fences, code, untrusted=False),
        "responses": "\n\n".join(blocks),
        "count": str(len(entries)),
        "ids": ", ".join(rid for rid, _ in entries),
        "boundary": code,
    }
    if criteria is not None:
        values["criteria"] = neutralise(criteria, fences, code, untrusted=False)
    messages: list[ChatMessage] = []
    if template.system:
        system = string.Template(template.system).substitute(values)
        messages.append({"role": "system", "content": system})
    messages.append({"role": "user", "content": string.Template(template.user).substitute(values)})
    return messages


def read_scores(value: Any, ids: Sequence[str]) -> tuple[dict[str, int], str | None]:
    """The score of every id listed exactly once, and what was wrong with the reply (None
    when every id has exactly one score)."""
    entries = value.get("scores") if isinstance(value, dict) else None
    if not isinstance(entries, list):
        return {}, "the reply has no list of scores"
    seen = Counter(e.get("id") for e in entries if isinstance(e, dict))
    scores = {
        str(e["id"]): int(e["score"])
        for e in entries
        if isinstance(e, dict) and seen[e.get("id")] == 1 and e.get("id") in ids
        if isinstance(e.get("score"), int) and 0 <= e["score"] <= MAX_SCORE
    }
    missing = [i for i in ids if i not in scores]
    if not missing and len(entries) == len(ids):
        return scores, None
    return scores, f"{len(entries)} scores for {len(ids)} responses; unscored: {missing}"


@dataclass
class Attempt:
    """One call's reply: the scores it gave and what went wrong."""

    scores: dict[str, int]
    status: ItemStatus = "ok"
    problem: str | None = None
    completion_tokens: int = 0


@dataclass
class ListwiseOutcome:
    """Per completion (in the group's order): a reward in [0, 1] or None, its status and
    error; plus the group's cost."""

    rewards: list[float | None]
    statuses: list[ItemStatus]
    errors: list[str | None]
    calls: int
    retried: bool
    completion_tokens: int
    prompt_chars: int = 0


async def judge_group(
    call: GenerateFn,
    template: PromptTemplate,
    code: str,
    question: str,
    texts: Sequence[str],
    *,
    criteria: str | None = None,
    max_new_tokens: int | None = None,
) -> ListwiseOutcome:
    """Score ``texts`` in one call (two when the first reply must be asked again)."""
    ids = item_ids(len(texts))
    max_new_tokens = max_new_tokens or reply_budget(len(texts))
    entries = list(zip(ids, texts, strict=True))
    first_messages = render(template, code, question, entries, criteria)
    first = await _ask(call, first_messages, ids, max_new_tokens)
    attempts, chars = [first], _chars(first_messages)
    if first.status == "ok" and first.problem is not None:
        again = render(template, code, question, entries[::-1], criteria)
        attempts.append(await _ask(call, again, ids, max_new_tokens))
        chars += _chars(again)
    return _outcome(ids, attempts, chars)


async def _ask(
    call: GenerateFn, messages: list[ChatMessage], ids: Sequence[str], max_new_tokens: int
) -> Attempt:
    request = GenerationRequest(
        messages, Sampling(max_new_tokens=max_new_tokens), schema=listwise_schema(ids)
    )
    [result] = await generate(call, [request])
    return _attempt(result, ids)


def _attempt(result: GenerationResult, ids: Sequence[str]) -> Attempt:
    if not result.ok or not result.samples:
        return Attempt({}, result.status, result.error or "the judge gave no reply")
    sample = result.samples[0]
    if sample.ok:
        scores, problem = read_scores(sample.value, ids)
        return Attempt(scores, "ok", problem, sample.num_tokens)
    # A reply off the schema (a server that ignores it, a reply cut short) still gives the
    # scores it states clearly; the rest are asked again.
    salvaged, problem = read_scores(_json_or_none(sample.text), ids)
    why = f"{problem}; the reply does not follow the schema ({sample.error})"
    return Attempt(salvaged, "ok", why, sample.num_tokens)


def _json_or_none(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _outcome(ids: Sequence[str], attempts: list[Attempt], chars: int) -> ListwiseOutcome:
    """The last attempt's score for each id, else the first's; else why there is none."""
    rewards: list[float | None] = []
    statuses: list[ItemStatus] = []
    errors: list[str | None] = []
    for rid in ids:
        found = next((a.scores[rid] for a in reversed(attempts) if rid in a.scores), None)
        if found is not None:
            rewards.append(found / MAX_SCORE)
            statuses.append("ok")
            errors.append(None)
            continue
        last = attempts[-1]
        rewards.append(None)
        statuses.append(last.status if last.status != "ok" else "unparseable")
        errors.append(last.problem)
    return ListwiseOutcome(
        rewards=rewards,
        statuses=statuses,
        errors=errors,
        calls=len(attempts),
        retried=len(attempts) > 1,
        completion_tokens=sum(a.completion_tokens for a in attempts),
        prompt_chars=chars,
    )


def _chars(messages: Sequence[ChatMessage]) -> int:
    return sum(len(m["content"]) for m in messages)


def response(ids: Sequence[str], outcome: ListwiseOutcome, stamp: JudgeStamp) -> ListwiseResponse:
    """The wire answer for completions ``ids``."""
    rows = zip(ids, outcome.rewards, outcome.statuses, outcome.errors, strict=True)
    return ListwiseResponse(
        results=[
            ListwiseResult(id=cid, reward=reward, status=status, error=error)
            for cid, reward, status, error in rows
        ],
        calls=outcome.calls,
        completion_tokens=outcome.completion_tokens,
        judge=stamp,
    )
