"""The judge cache's keys and stored results (services/core/models/cached_judge.py).

Keys are shared by every replica on one Redis, and by a new release with an old one during a
rolling update: a change in how they are computed would silently empty the cache, so the key
is pinned to the text ``dataclasses.asdict`` gave before the shallow encoding (issue 19)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from typing import Any

import pytest

from judges.backends.base import (
    BackendInfo,
    ChoiceRequest,
    ChoiceResult,
    GeneratedText,
    GenerateRequest,
    GenerateResult,
)
from services.core.cache import MemoryCache
from services.core.models.cached_judge import (
    _SPLICE,
    CachedJudge,
    _decode,
    _encode,
    key_text,
)
from tests.services.judge.scripted import ScriptedBackend

MESSAGES = [
    {"role": "system", "content": "You judge replies."},
    {"role": "user", "content": "Which is better? <<response_a 7f>> 4 <<response_b 7f>> 5"},
]


def _asdict_key(judge: CachedJudge, op: str, request: object) -> str:
    info = judge.backend.info
    payload = {
        "backend": info.name,
        "model": info.model_id,
        "scoring": {k: info.details.get(k) for k in ("choice_mode", "choice_scoring", "compat")},
        "op": op,
        "request": dataclasses.asdict(request),  # type: ignore[call-overload]
    }
    raw = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=list)
    return f"judge:{hashlib.sha256(raw.encode()).hexdigest()}"


def test_keys_are_the_ones_earlier_releases_computed() -> None:
    judge = CachedJudge(ScriptedBackend(), MemoryCache())
    choice = ChoiceRequest(MESSAGES, ("A", "B"), assistant_prefix="Verdict: ")
    schema = {"type": "object", "properties": {"verdict": {"enum": ["A", "B"]}}}
    generate = GenerateRequest(MESSAGES, max_new_tokens=8, stop=("\n",), json_schema=schema)
    assert judge.key("choices", choice) == _asdict_key(judge, "choices", choice)
    assert judge.key("generate", generate) == _asdict_key(judge, "generate", generate)
    other = ChoiceRequest(MESSAGES, ("A", "B"), assistant_prefix="Verdict:")
    assert judge.key("choices", other) != judge.key("choices", choice)


class _Served(ScriptedBackend):
    """A backend whose info can change between calls (a server found to score otherwise)."""

    def __init__(self, model_id: str, details: dict[str, Any]) -> None:
        super().__init__()
        self.model = model_id
        self.details = details

    @property
    def info(self) -> BackendInfo:
        return BackendInfo("openai", self.model, details=dict(self.details))


@pytest.mark.parametrize(
    "model",
    ["stub-judge", "caf\u00e9 \ud800", _SPLICE, json.dumps(_SPLICE)],
)
def test_spliced_keys_equal_the_whole_payload_hashed(model: str) -> None:
    """Issue 19: the backend's part of the key text is hashed once per batch and each
    request's fields are added to a copy of that state; the digest must be the one of the
    whole text, for text json escapes, floats (a generate request's), and a model name that
    holds the splice mark itself (the whole payload is hashed then)."""
    judge = CachedJudge(_Served(model, {"choice_mode": "batched", "compat": "vllm"}), MemoryCache())
    requests: list[ChoiceRequest | GenerateRequest] = [
        ChoiceRequest(MESSAGES, ("A", "B"), assistant_prefix="Verdict: "),
        ChoiceRequest(
            [{"role": "user", "content": "\u65e5\u672c \U0001f600 \x7f \ud83d " + ASCII}],
            ("1", "10"),
        ),
        GenerateRequest(MESSAGES, temperature=0.7, top_p=0.95, seed=3, stop=("\n",)),
        GenerateRequest(MESSAGES, json_schema={"minimum": 0.1, "maximum": 1e16}),
    ]
    for op in ("choices", "generate"):
        for request in requests:
            assert judge.key(op, request) == _asdict_key(judge, op, request)


def test_a_change_of_scoring_between_batches_changes_the_key() -> None:
    backend = _Served("stub-judge", {"choice_scoring": "first_token"})
    judge = CachedJudge(backend, MemoryCache())
    request = ChoiceRequest(MESSAGES, ("A", "B"))
    before = judge.key("choices", request)
    backend.details = {"choice_scoring": "sequence"}
    after = judge.key("choices", request)
    assert after != before and after == _asdict_key(judge, "choices", request)
    backend.model = "another-judge"
    assert judge.key("choices", request) == _asdict_key(judge, "choices", request) != after
    # Details equal in Python but written differently in JSON give different keys.
    keys = set()
    for value in (True, 1, 1.0, None, ["a"]):
        backend.details = {"compat": value}
        keys.add(judge.key("choices", request))
        assert judge.key("choices", request) == _asdict_key(judge, "choices", request)
    assert len(keys) == 5


def test_stored_results_come_back_equal() -> None:
    choice = ChoiceResult("ok", ("A", "B"), (-0.1, -2.4), (0.9, 0.1), 0.99)
    samples = (GeneratedText("A", 1, "stop"), GeneratedText("B", 2, "length"))
    generated = GenerateResult.of(samples)
    assert _decode(ChoiceResult, _encode(choice)) == choice
    assert _decode(GenerateResult, _encode(generated)) == generated
    failed = GenerateResult.failed("timeout", "too slow")
    assert _decode(GenerateResult, _encode(failed)) == failed
    lone = GenerateResult.of((GeneratedText("half a pair: \ud83d", 3, "stop"),))
    assert _decode(GenerateResult, _encode(lone)) == lone  # orjson refuses it; json does not


@pytest.mark.parametrize(
    "logprobs",
    [(-0.1234567890123, -2.4), (-math.inf, -0.5), (-1e-300, -745.0), (float("nan"), -1.0)],
)
def test_stored_choices_keep_every_float_including_minus_infinity_and_nan(
    logprobs: tuple[float, float],
) -> None:
    """orjson writes a non-finite float as null; such a result is stored by json.dumps."""
    choice = ChoiceResult("ok", ("A", "B"), logprobs, (0.7, 0.3), None)
    back = _decode(ChoiceResult, _encode(choice))
    assert [str(v) for v in back.logprobs] == [str(v) for v in logprobs]
    assert back.probs == choice.probs and back.coverage is None


ASCII = "".join(chr(c) for c in range(128))  # every control character, quote, backslash, DEL


@pytest.mark.parametrize(
    "payload",
    [
        {"op": "choices", "request": {"messages": MESSAGES, "candidates": ("A", "B")}},
        {"text": ASCII, "nested": [{"b": ASCII[:64], "a": [1, True, None, ("x", [])]}]},
        {"text": ASCII[:127], "keys": {"Z": 1, "a": 2, "_": 3, "1": 4}},
        {"text": "caf\u00e9 \u65e5\u672c \U0001f600", "n": -3},  # non-ASCII: escaped by json
        {"text": "lone \ud800 surrogate"},  # orjson refuses it
        {"t": 0.1, "e": 1e16, "small": 1.5e-7, "inf": float("inf")},  # floats: json's digits
        {"big": 2**70, "set": frozenset()},  # past 64 bits; a type default=list turns a list
        {2: "int keys", 1: "become text"},
    ],
)
def test_key_text_is_the_text_json_dumps_gives(payload: dict[Any, Any]) -> None:
    expected = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=list)
    assert key_text(payload) == expected.encode()


def test_a_payload_that_holds_itself_is_refused_as_json_refuses_it() -> None:
    looped: dict[str, Any] = {"a": []}
    looped["a"].append(looped)
    with pytest.raises(ValueError, match="Circular reference"):
        key_text(looped)
