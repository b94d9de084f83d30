"""The generation interface: requests, validation of replies, statuses (scripted backend).

The scripted backend does not enforce schemas, so these tests can send replies that do not
validate, as a server that ignores ``response_format`` would. Real constrained decoding is
tested in test_structured_local.py (SmolLM2) and tests/vllm (a real vLLM server).
"""

from __future__ import annotations

import json
from typing import Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field

from judges.backends.base import (
    GeneratedText,
    GenerateRequest,
    GenerateResult,
    user,
    validate_generate,
)
from judges.generation import (
    GenerationRequest,
    Sampling,
    generate,
    json_schema_of,
    parse_output,
    validate_sample,
)
from services.core.cache import MemoryCache
from services.core.models.cached_judge import CachedJudge
from tests.judges.scripted_backend import ScriptedBackend, ScriptedFailure


class Verdict(BaseModel):
    model_config = ConfigDict(extra="forbid")
    analysis: str = Field(max_length=40)
    verdict: Literal["A", "B", "tie"]


DICT_SCHEMA = {
    "type": "object",
    "properties": {"score": {"type": "integer", "minimum": 1, "maximum": 10}},
    "required": ["score"],
    "additionalProperties": False,
}


def replies(*texts: str) -> ScriptedBackend:
    """A backend answering with ``texts`` in turn (one per sample)."""
    queue = list(texts)
    return ScriptedBackend(reply=lambda request: queue.pop(0))


async def test_a_pydantic_schema_gives_model_instances_and_invalid_outputs() -> None:
    good = json.dumps({"analysis": "A is right.", "verdict": "A"})
    backend = replies(good, '{"analysis": "x", "verdict": "C"}', "Verdict: A", good)
    [first, second] = await generate(
        backend.generate,
        [
            GenerationRequest([user("A or B?")], Sampling(max_new_tokens=64), n=3, schema=Verdict),
            GenerationRequest([user("again")], schema=Verdict),
        ],
    )
    assert first.ok and [s.status for s in first.samples] == [
        "ok",
        "invalid_output",
        "invalid_output",
    ]
    ok, wrong_value, not_json = first.samples
    assert isinstance(ok.value, Verdict) and ok.value.verdict == "A" and ok.text == good
    assert wrong_value.value is None and "verdict" in (wrong_value.error or "")
    assert not_json.status == "invalid_output" and not_json.text == "Verdict: A"
    assert first.values() == [ok.value]
    assert second.samples[0].ok
    [sent] = backend.calls
    assert sent[0].json_schema == Verdict.model_json_schema()  # type: ignore[union-attr]
    assert sent[0].n == 3 and sent[0].max_new_tokens == 64  # type: ignore[union-attr]


async def test_a_dict_schema_is_validated_with_json_schema() -> None:
    backend = replies('{"score": 7}', '{"score": 11}', '{"score": 3, "extra": 1}')
    [result] = await generate(
        backend.generate, [GenerationRequest([user("grade")], n=3, schema=DICT_SCHEMA)]
    )
    assert [s.status for s in result.samples] == ["ok", "invalid_output", "invalid_output"]
    assert result.samples[0].value == {"score": 7}
    assert "11" in (result.samples[1].error or "")


async def test_no_schema_returns_the_text_and_stop_strings_cut_it() -> None:
    backend = replies("first line\nsecond line")
    [result] = await generate(
        backend.generate,
        [GenerationRequest([user("say")], stop=["\n"], sampling=Sampling(temperature=0.7))],
    )
    assert result.samples[0].ok and result.samples[0].value == "first line"


async def test_backend_failures_keep_their_status_and_have_no_samples() -> None:
    def script(request: GenerateRequest) -> str:
        raise ScriptedFailure("timeout", "too slow")

    [timed_out] = await generate(
        ScriptedBackend(reply=script).generate, [GenerationRequest([user("x")], schema=Verdict)]
    )
    assert timed_out.status == "timeout" and timed_out.samples == () and timed_out.error
    [invalid] = await generate(
        ScriptedBackend().generate, [GenerationRequest([user("x")], n=0, schema=Verdict)]
    )
    assert invalid.status == "invalid" and "n must be" in (invalid.error or "")


def test_a_reply_cut_at_the_budget_says_so() -> None:
    cut = validate_sample(GeneratedText('{"analysis": "long', 8, "length"), Verdict)
    assert cut.status == "invalid_output" and "max_new_tokens" in (cut.error or "")
    assert cut.text == '{"analysis": "long'


def test_parse_output_and_schema_conversion() -> None:
    assert parse_output('{"score": 2}', DICT_SCHEMA) == {"score": 2}
    with pytest.raises(ValueError, match="not JSON"):
        parse_output("{", DICT_SCHEMA)
    with pytest.raises(ValueError, match="analysis"):
        parse_output(json.dumps({"analysis": "x" * 41, "verdict": "A"}), Verdict)
    assert json_schema_of(DICT_SCHEMA) == DICT_SCHEMA
    assert json_schema_of(Verdict)["properties"]["analysis"]["maxLength"] == 40
    with pytest.raises(TypeError):
        json_schema_of(42)  # type: ignore[arg-type]


def test_new_generate_fields_are_validated() -> None:
    base = [user("u")]
    assert validate_generate(GenerateRequest(base, top_p=0.9, n=4, stop=["\n"])) is None
    assert validate_generate(GenerateRequest(base, top_p=0.0)) is not None
    assert validate_generate(GenerateRequest(base, top_p=1.5)) is not None
    assert validate_generate(GenerateRequest(base, n=17)) is not None
    assert validate_generate(GenerateRequest(base, stop=[""])) is not None
    assert validate_generate(GenerateRequest(base, stop="\n")) is not None
    assert validate_generate(GenerateRequest(base, json_schema=[1])) is not None  # type: ignore[arg-type]


async def test_cached_samples_come_back_whole() -> None:
    backend = replies('{"score": 1}', '{"score": 2}')
    judge = CachedJudge(backend, MemoryCache())
    request = GenerationRequest([user("x")], Sampling(seed=3), n=2, schema=DICT_SCHEMA)
    [first] = await generate(judge.generate, [request])
    [again] = await generate(judge.generate, [request])
    assert len(backend.calls) == 1, "the second call is a cache hit"
    assert again == first and [s.value for s in again.samples] == [{"score": 1}, {"score": 2}]


def test_a_result_built_from_text_alone_has_one_sample() -> None:
    result = GenerateResult("ok", "hi", 1, "stop")
    assert result.all_samples() == (GeneratedText("hi", 1, "stop"),)
    assert GenerateResult.failed("error", "x").all_samples() == ()
