"""Wire models of rubric synthesis (pydantic only).

``POST /v1/rubrics/synthesize`` takes inline documents or the built-in corpus::

    {"documents": [{"id": "boil", "text": "Water boils at ..."}]}
    {"corpus": "wikipedia", "limit": 200, "seed": 0}

and answers 202 with a ``rubrics.synthesize`` job. The job's result is a
:class:`SynthesisResult`; kept instances and rejected candidates are listed by
``GET /v1/rubrics/instances?job_id=...&status=kept|rejected``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from plaudit_wire.rubrics import RubricMode
from plaudit_wire.schemas import StoredModel, exactly_one_of

#: The stages in order; a rejected candidate names the one that rejected it.
Stage = Literal["filter", "domain", "generate", "instance", "rubric"]
STAGES: tuple[Stage, ...] = ("filter", "domain", "generate", "instance", "rubric")
InstanceStatus = Literal["kept", "rejected"]
ExportFormat = Literal["trl", "verl", "openrlhf"]
Corpus = Literal["wikipedia"]


class DocumentIn(StoredModel):
    id: str = Field(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$")
    text: str = Field(min_length=1, max_length=50_000)
    title: str | None = Field(default=None, max_length=300)


class SynthesisOptions(StoredModel):
    """The thresholds of the stages (defaults documented in README, Rubric synthesis)."""

    min_chars: int = Field(default=200, ge=1, le=50_000, description="stage 1: shortest text")
    max_chars: int = Field(default=4000, ge=1, le=50_000, description="stage 1: longest text")
    min_sentences: int = Field(default=2, ge=1, le=100, description="stage 1: context needed")
    min_criteria: int = Field(default=3, ge=1, le=50, description="stage 5")
    max_criteria: int = Field(default=8, ge=1, le=50, description="stage 5")
    min_weight: float = Field(default=1, gt=0, le=100, description="stage 5")
    max_weight: float = Field(default=10, gt=0, le=100, description="stage 5")
    min_pitfalls: int = Field(default=1, ge=0, le=50, description="stage 5: pitfalls needed")
    max_pitfall_share: float = Field(default=0.5, ge=0, le=1, description="stage 5")
    duplicate_similarity: float = Field(
        default=0.9, gt=0, le=1, description="stage 5: criteria this similar are duplicates"
    )
    max_leak: float = Field(
        default=0.6,
        ge=0,
        le=1,
        description="stage 4: largest share of the answer's content words found in the question",
    )
    min_support: float = Field(
        default=0.6,
        ge=0,
        le=1,
        description="stage 4: smallest share of the answer's content words found in the document",
    )
    min_similarity: float = Field(
        default=0.4,
        ge=-1,
        le=1,
        description="stage 4: smallest cosine (MiniLM) between the answer and the document",
    )
    min_required_met: float = Field(
        default=0.75,
        ge=0,
        le=1,
        description="stage 5: share of required criteria the reference answer must meet "
        "(P(met) >= 0.5)",
    )
    mode: RubricMode = Field(default="logprob", description="stage 5: how the rubric is scored")

    @model_validator(mode="after")
    def _ranges(self) -> SynthesisOptions:
        for low, high in (
            ("min_chars", "max_chars"),
            ("min_criteria", "max_criteria"),
            ("min_weight", "max_weight"),
        ):
            if getattr(self, low) > getattr(self, high):
                raise ValueError(f"{low} must not exceed {high}")
        return self


class SynthesizeRequest(StoredModel):
    """``POST /v1/rubrics/synthesize``: inline ``documents`` or a ``corpus`` (one of them)."""

    model_config = ConfigDict(json_schema_extra=exactly_one_of("documents", "corpus"))

    documents: list[DocumentIn] | None = Field(default=None, min_length=1)
    corpus: Corpus | None = Field(
        default=None,
        description="wikipedia: 10,033 English lead extracts (plaudit data fetch wikipedia)",
    )
    limit: int = Field(default=20, ge=1, le=100_000, description="corpus: documents taken")
    seed: int = Field(default=0, ge=0, le=2**31 - 1, description="corpus sample and personas")
    options: SynthesisOptions = Field(default_factory=SynthesisOptions)
    temperature: float = Field(default=0.0, ge=0, le=2, description="generator sampling")
    max_new_tokens: int | None = Field(
        default=None, ge=64, le=8192, description="default: settings.synthesis_max_new_tokens"
    )

    @model_validator(mode="after")
    def _one_source(self) -> SynthesizeRequest:
        if (self.documents is None) == (self.corpus is None):
            raise ValueError("give exactly one of documents and corpus")
        if self.documents is not None:
            seen: set[str] = set()
            for index, doc in enumerate(self.documents):
                if doc.id in seen:
                    raise ValueError(f"documents[{index}].id {doc.id!r} repeats an earlier id")
                seen.add(doc.id)
        return self


class StageCount(BaseModel):
    stage: Stage
    entered: int
    rejected: int
    reasons: dict[str, int]


class SynthesisResult(BaseModel):
    """The job's answer: how many documents each stage took in and rejected, and why."""

    job_id: str
    documents: int
    kept: int
    retention: float | None
    stages: list[StageCount]
    criteria_per_instance: float | None
    pitfall_share: float | None
    domains: dict[str, int]
    seconds: float
    documents_per_minute: float | None
    generator: dict[str, str]
    rubric_ids: list[str]


class InstanceOut(BaseModel):
    """A kept instance (with its rubric) or a rejected candidate (with stage and reason)."""

    id: str
    job_id: str
    status: InstanceStatus
    document_id: str
    stage: Stage | None
    reason: str | None
    domain: str | None
    persona: str | None
    question: str | None
    reference_answer: str | None
    rubric_id: str | None
    rubric_version: int | None
    candidate: dict[str, Any]
    created_at: str
