"""Constrained decoding on the real SmolLM2 (transformers + xgrammar): schema-valid JSON.

Asserts validation, never content: the 135M model's opinions are not the point.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field

from judges.backends.base import GenerateRequest, system, user
from judges.generation import GenerationRequest, Sampling, generate
from judges.templates import load_template
from services.judge.structured import verdict_schema

if TYPE_CHECKING:
    from judges.backends.local import LocalBackend

pytest.importorskip("xgrammar")


class Review(BaseModel):
    model_config = ConfigDict(extra="forbid")
    summary: str = Field(max_length=30)
    stars: int = Field(ge=1, le=5)
    verdict: Literal["buy", "skip"]


QUESTIONS = ["Review a cheap umbrella that broke after one day.", "Review a good bakery."]


async def test_a_batch_of_prompts_gives_schema_valid_objects(backend: LocalBackend) -> None:
    head = system("You write short product reviews as JSON with summary, stars and verdict.")
    requests = [
        GenerationRequest([head, user(q)], Sampling(max_new_tokens=48), schema=Review)
        for q in QUESTIONS
    ]
    requests.append(
        GenerationRequest(
            [head, user(QUESTIONS[0])],
            Sampling(max_new_tokens=48, temperature=1.0, top_p=0.9, seed=3),
            n=2,
            schema=Review,
        )
    )
    results = await generate(backend.generate, requests)
    samples = [s for r in results for s in r.samples]
    assert all(r.ok for r in results) and len(samples) == 4
    for sample in samples:
        assert sample.ok, (sample.text, sample.error)
        assert isinstance(sample.value, Review)
        assert Review.model_validate_json(sample.text) == sample.value
        assert list(json.loads(sample.text)) == ["summary", "stars", "verdict"], "schema order"
        assert sample.finish_reason == "stop"


async def test_judge_prompts_always_yield_a_verdict_and_match_alone(
    backend: LocalBackend,
) -> None:
    """Both orders of a pair (a long shared template head: the prefix path), batched."""
    template = load_template("pairwise_json@1")
    prompts = [
        template.render(question="2+2?", response_a=a, response_b=b)
        for a, b in (("4", "It is 5, clearly."), ("It is 5, clearly.", "4"))
    ]
    schema = verdict_schema(40)
    requests = [GenerateRequest(p.messages, max_new_tokens=40, json_schema=schema) for p in prompts]
    batched = await backend.generate(requests)
    for result in batched:
        assert result.ok, result.error
        reply = json.loads(result.text)
        assert reply["verdict"] in ("A", "B", "tie")
        assert len(reply["analysis"]) <= schema["properties"]["analysis"]["maxLength"]
    [alone] = await backend.generate(requests[:1])
    assert json.loads(alone.text)["verdict"] == json.loads(batched[0].text)["verdict"]


async def test_schema_and_free_rows_mix_and_stop_strings_cut(backend: LocalBackend) -> None:
    free, cut, constrained = await backend.generate(
        [
            GenerateRequest([user("Count from 1 to 20, one number per line.")], 16),
            GenerateRequest([user("Count from 1 to 20, one number per line.")], 16, stop=["3"]),
            GenerateRequest(
                [user("Give a number.")], 8, json_schema={"type": "integer", "maximum": 99}
            ),
        ]
    )
    assert free.ok and cut.ok and constrained.ok
    assert "3" in free.text and "3" not in cut.text and free.text.startswith(cut.text)
    assert cut.finish_reason == "stop"
    assert 0 <= int(constrained.text) <= 99


async def test_an_unsupported_schema_is_an_invalid_item(backend: LocalBackend) -> None:
    bad, fine = await backend.generate(
        [
            GenerateRequest([user("x")], 8, json_schema={"type": "no-such-type"}),
            GenerateRequest([user("x")], 4),
        ]
    )
    assert bad.status == "invalid" and "schema" in (bad.error or "")
    assert fine.ok
