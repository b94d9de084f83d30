"""Generation with structured output: one interface for every model consumer.

The judge's generate mode uses it now; rubric synthesis, the memory's analyst and editor and
the user simulator are meant to use it too. A :class:`GenerationRequest` carries chat
messages, :class:`Sampling` settings, stop strings, ``n`` and, optionally, an output
schema: a pydantic model class or a JSON schema (a dict). :func:`generate` sends the
requests to any backend's ``generate`` (local: constrained decoding through xgrammar;
OpenAI-compatible: ``response_format`` with the JSON schema; in-process vLLM: its guided
decoding; scripted: for tests), then validates what came back, because a server may ignore
the schema and a reply can run out of tokens. Per item and per sample the answer is either
an object that validates (``status="ok"``, ``value`` and the raw ``text``) or
``status="invalid_output"`` with the raw text and why it failed. An item the backend could
not serve keeps the backend's status (``invalid``, ``error``, ``timeout``) and no samples.

Example::

    class Verdict(BaseModel):
        analysis: str = Field(max_length=200)
        verdict: Literal["A", "B", "tie"]

    [result] = await generate(
        backend.generate,
        [GenerationRequest([user("A or B?")], Sampling(max_new_tokens=96), schema=Verdict)],
    )
    if result.ok and result.samples[0].ok:
        verdict = result.samples[0].value  # a Verdict instance
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from judges.backends.base import (
    ChatMessage,
    FinishReason,
    GeneratedText,
    GenerateRequest,
    GenerateResult,
    ItemStatus,
)

SampleStatus = Literal["ok", "invalid_output"]
"""A sample's outcome: a reply that validates, or one that does not (kept as raw text)."""
JsonSchema = Mapping[str, Any]
Schema = type[BaseModel] | JsonSchema
GenerateFn = Callable[[Sequence[GenerateRequest]], Awaitable[list[GenerateResult]]]
"""A backend's ``generate`` (or a wrapper of it, such as the judge's cache)."""


@dataclass(frozen=True, slots=True)
class Sampling:
    """How to sample: greedy at ``temperature=0``; ``seed`` makes a sample reproducible."""

    temperature: float = 0.0
    top_p: float = 1.0
    max_new_tokens: int = 256
    seed: int | None = None


@dataclass(frozen=True, slots=True)
class GenerationRequest:
    """One prompt to answer ``n`` times, optionally as an object following ``schema``."""

    messages: Sequence[ChatMessage]
    sampling: Sampling = field(default_factory=Sampling)
    stop: Sequence[str] = ()
    n: int = 1
    schema: Schema | None = None

    def backend_request(self) -> GenerateRequest:
        """The backend request, with the schema as JSON schema."""
        return GenerateRequest(
            messages=list(self.messages),
            max_new_tokens=self.sampling.max_new_tokens,
            temperature=self.sampling.temperature,
            seed=self.sampling.seed,
            top_p=self.sampling.top_p,
            stop=tuple(self.stop),
            n=self.n,
            json_schema=None if self.schema is None else json_schema_of(self.schema),
        )


@dataclass(frozen=True, slots=True)
class Sample:
    """One generated reply. ``value`` is the validated object (an instance of the pydantic
    model, or the decoded JSON for a dict schema; the text itself without a schema)."""

    status: SampleStatus
    text: str
    value: Any = None
    num_tokens: int = 0
    finish_reason: FinishReason | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        """True when the reply validated."""
        return self.status == "ok"


@dataclass(frozen=True, slots=True)
class GenerationResult:
    """One item's samples (``n`` of them), or the backend's failure status for the item."""

    status: ItemStatus
    samples: tuple[Sample, ...] = ()
    error: str | None = None

    @property
    def ok(self) -> bool:
        """True when the backend answered the item (its samples may still be invalid)."""
        return self.status == "ok"

    def values(self) -> list[Any]:
        """The validated objects of the samples that validated."""
        return [s.value for s in self.samples if s.ok]


async def generate(
    call: GenerateFn, requests: Sequence[GenerationRequest]
) -> list[GenerationResult]:
    """Generate every request through ``call`` (one batched call) and validate the replies."""
    if not requests:
        return []
    answers = await call([r.backend_request() for r in requests])
    return [to_result(r, a) for r, a in zip(requests, answers, strict=True)]


def to_result(request: GenerationRequest, answer: GenerateResult) -> GenerationResult:
    """Validate a backend answer against the request's schema."""
    if not answer.ok:
        return GenerationResult(answer.status, (), answer.error)
    samples = tuple(validate_sample(s, request.schema) for s in answer.all_samples())
    return GenerationResult("ok", samples)


def validate_sample(sample: GeneratedText, schema: Schema | None) -> Sample:
    """A sample that validates against ``schema`` (or any text, without one), else
    ``invalid_output`` with the reason."""
    tokens, finish = sample.num_tokens, sample.finish_reason
    if schema is None:
        return Sample("ok", sample.text, sample.text, tokens, finish)
    try:
        value = parse_output(sample.text, schema)
    except ValueError as exc:
        why = str(exc)
        if finish == "length":
            why = f"reply cut at max_new_tokens: {why}"
        return Sample("invalid_output", sample.text, None, tokens, finish, why[:500])
    return Sample("ok", sample.text, value, tokens, finish)


def parse_output(text: str, schema: Schema) -> Any:
    """The object ``text`` encodes, validated against ``schema``; raises ``ValueError``.

    >>> parse_output('{"x": 1}', {"type": "object", "properties": {"x": {"type": "integer"}}})
    {'x': 1}
    """
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        try:
            return schema.model_validate_json(text)
        except ValidationError as exc:
            raise ValueError(_pydantic_reason(exc)) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    import jsonschema

    try:
        jsonschema.validate(data, dict(schema))
    except jsonschema.ValidationError as exc:
        raise ValueError(f"does not match the schema: {exc.message}") from None
    except jsonschema.SchemaError as exc:
        raise ValueError(f"the schema itself is invalid: {exc.message}") from None
    return data


def json_schema_of(schema: Schema) -> dict[str, Any]:
    """The JSON schema of a pydantic model class, or a dict schema as is."""
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return schema.model_json_schema()
    if not isinstance(schema, Mapping):
        raise TypeError("schema must be a pydantic model class or a JSON schema dict")
    return dict(schema)


def _pydantic_reason(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "the reply"
    return f"{where}: {first['msg']}"
