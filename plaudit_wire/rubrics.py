"""Wire models of the rubrics service (pydantic only: no FastAPI, no torch).

A rubric is a list of weighted criteria. A ``required`` criterion is something a good answer
does; a ``pitfall`` describes a mistake. Each criterion keeps a stable id (``c1``, ``c2``, ...)
across versions, so a reworded criterion keeps its history. Limits that depend on settings
(how many criteria, the largest weight) and duplicates are checked by
:func:`services.rubrics.validation.check_rubric` before anything is stored or judged.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from plaudit_wire.schemas import (
    INT32_MAX,
    Completions,
    ItemStatus,
    Prompt,
    RunTag,
    StoredModel,
    StrictModel,
    TemplateRef,
    exactly_one_of,
)

CriterionKind = Literal["required", "pitfall"]
#: logprob: P(yes) per (completion, criterion) from one forward pass; generate: one JSON reply
#: per completion with every criterion's verdict; implicit: one 1..k grade against the rubric.
RubricMode = Literal["logprob", "generate", "implicit"]
#: required_weights: divide the signed sum by the sum of required weights (HealthBench);
#: none: the raw signed sum.
Normalize = Literal["required_weights", "none"]
#: weighted: the rubric's weights; focal: weights moved toward criteria that are not yet
#: passed, from per-criterion pass rates (a placeholder the evaluation memory will feed).
Aggregation = Literal["weighted", "focal"]

CRITERION_ID = r"^c[1-9][0-9]{0,5}$"
RUBRIC_REF = r"^rb_[0-9a-f]{1,40}(@[1-9][0-9]{0,8})?$"


def _rubric_ref(value: str) -> str:
    # Issue 21: pydantic's own message quoted the regex at the user.
    if not re.fullmatch(RUBRIC_REF, value):
        raise ValueError(
            f"{value[:60]!r} is not a rubric reference: rb_ and hex digits (an id as the API "
            "returns it), optionally @version, e.g. rb_3f2a or rb_3f2a@2"
        )
    return value


#: ``rb_...`` or ``rb_...@N``, checked with a message in words; OpenAPI still shows the pattern.
RubricReference = Annotated[
    str, AfterValidator(_rubric_ref), Field(json_schema_extra={"pattern": RUBRIC_REF})
]


class CriterionIn(StoredModel):
    """One criterion as a client writes it; ``id`` is given when editing (keeps its history)."""

    id: str | None = Field(
        default=None,
        pattern=CRITERION_ID,
        description="stable id (c1, c2, ...): send it back when rewording a criterion",
    )
    text: str = Field(min_length=1, max_length=2000)
    weight: float = Field(default=1.0, gt=0, allow_inf_nan=False)
    kind: CriterionKind = "required"
    anchor: bool = Field(
        default=False, description="never changed by automatic revision (evaluation memory)"
    )


class RubricFields(StoredModel):
    """What a rubric holds besides its name."""

    question: str | None = Field(default=None, max_length=20_000)
    reference_answer: str | None = Field(default=None, max_length=20_000)
    domain: str | None = Field(default=None, min_length=1, max_length=100)
    source: str | None = Field(default=None, min_length=1, max_length=200)
    criteria: list[CriterionIn] = Field(min_length=1)


class RubricCreate(RubricFields):
    """``POST /v1/rubrics``: ``{"name": "boil", "criteria": [{"text": "...", "weight": 3}]}``"""

    name: str = Field(min_length=1, max_length=200)


class RubricUpdate(RubricCreate):
    """``PUT /v1/rubrics/{id}``: the whole new version. Criteria sent with their id keep it;
    criteria without one are new. ``expected_version``: the version the edit is based on
    (409 when the rubric has moved on)."""

    expected_version: int | None = Field(default=None, ge=1, le=INT32_MAX)
    note: str | None = Field(default=None, max_length=1000)


class InlineRubric(RubricFields):
    """A rubric given inside a score request (not stored)."""

    name: str | None = Field(default=None, max_length=200)


class RollbackRequest(StoredModel):
    """Make an older version current again (``{"to": 1}``); later versions are kept."""

    to: int = Field(ge=1, le=INT32_MAX)
    expected_version: int | None = Field(default=None, ge=1, le=INT32_MAX)
    note: str | None = Field(
        default=None, max_length=500, description="kept with the move in the rubric's history"
    )


class Criterion(BaseModel):
    """A stored criterion: every field, with its stable id."""

    id: str
    text: str
    weight: float
    kind: CriterionKind
    anchor: bool


class RubricContent(BaseModel):
    """The versioned content of a rubric (what a version stores and what a diff compares)."""

    name: str | None = None
    question: str | None = None
    reference_answer: str | None = None
    domain: str | None = None
    source: str | None = None
    criteria: list[Criterion]


class RubricOut(RubricContent):
    """A rubric version as the API returns it."""

    id: str
    version: int
    current_version: int
    latest_version: int
    created_at: str
    updated_at: str = Field(description="when this version was written")


class RubricVersionInfo(BaseModel):
    version: int
    created_at: str
    note: str | None
    criteria: int
    content_hash: str
    current: bool


class FieldChange(BaseModel):
    before: Any = Field(serialization_alias="from")
    after: Any = Field(serialization_alias="to")


class CriterionChange(BaseModel):
    """A criterion present in both versions whose fields differ (same id)."""

    id: str
    changes: dict[str, FieldChange]


class RubricDiff(BaseModel):
    """Two versions compared criterion by criterion (by id), and field by field."""

    id: str
    from_version: int = Field(serialization_alias="from")
    to_version: int = Field(serialization_alias="to")
    fields: dict[str, FieldChange]
    added: list[Criterion]
    removed: list[Criterion]
    changed: list[CriterionChange]
    unchanged: list[str]


class ImportResult(BaseModel):
    """``POST /v1/rubrics/import``: every line stored, or nothing (422 naming the line)."""

    created: list[RubricOut]
    total: int


# --- scoring --------------------------------------------------------------------------------


class ScoreOptions(StrictModel):
    """How a rubric scores completions (the request's and the ``rubric`` channel's options)."""

    mode: RubricMode = "logprob"
    show_reference: bool = Field(
        default=False, description="show the judge the rubric's reference answer"
    )
    normalize: Normalize = "required_weights"
    aggregation: Aggregation = "weighted"
    pass_rates: dict[Annotated[str, Field(max_length=20)], float] | None = Field(
        default=None,
        description="focal: per criterion id, the share of recent completions that passed it "
        "(required: met; pitfall: avoided), each in [0, 1]",
    )
    focal_gamma: float = Field(default=1.0, ge=0, le=10, allow_inf_nan=False)
    k: int = Field(default=10, ge=2, le=100, description="implicit mode: grades 1..k")
    template: TemplateRef | None = Field(
        default=None, description="judge template name@version (default: by mode)"
    )

    @model_validator(mode="after")
    def _focal_needs_rates(self) -> ScoreOptions:
        if self.aggregation == "focal" and not self.pass_rates:
            raise ValueError("aggregation 'focal' needs pass_rates (per criterion id)")
        for cid, rate in (self.pass_rates or {}).items():
            if not 0.0 <= rate <= 1.0:
                raise ValueError(f"pass_rates[{cid}] must lie in [0, 1]")
        return self


class ScoreRequest(ScoreOptions, RunTag):
    """``POST /v1/rubrics/score``: one prompt, its completions and a rubric.

    Example::

        {"rubric_id": "rb_3f2a@2", "prompt": "Why does water boil sooner on a mountain?",
         "completions": ["Lower air pressure...", "Because it is colder."]}
    """

    model_config = ConfigDict(json_schema_extra=exactly_one_of("rubric_id", "rubric"))

    prompt: Prompt | None = Field(default=None, description="default: the rubric's question")
    completions: Completions = Field(min_length=1)
    rubric_id: RubricReference | None = Field(default=None, description="id or id@version")
    rubric: InlineRubric | None = None
    cache: bool = Field(default=True, description="use the judge cache")

    @model_validator(mode="after")
    def _one_rubric(self) -> ScoreRequest:
        if (self.rubric_id is None) == (self.rubric is None):
            raise ValueError("give exactly one of rubric_id and rubric")
        return self


class RubricRef(BaseModel):
    id: str | None
    version: int | None
    name: str | None = None


class CriterionResult(BaseModel):
    id: str
    p: float | None = Field(description="P(met): the criterion's statement holds for the response")
    weight: float = Field(description="the weight used (focal aggregation moves it)")
    kind: CriterionKind
    status: ItemStatus
    coverage: float | None = Field(
        default=None, description="logprob: the probability mass the judge put on yes/no"
    )
    reason: str | None = Field(default=None, description="generate mode: the judge's reason")
    error: str | None = None


class CompletionScore(BaseModel):
    id: str
    reward: float | None = Field(description="null when a criterion could not be assessed")
    status: ItemStatus
    criteria: list[CriterionResult]
    grade: float | None = Field(default=None, description="implicit mode: the expected grade")
    distribution: list[float] | None = None
    error: str | None = None


class RubricJudgeStamp(BaseModel):
    backend: str
    model: str
    template: str
    mode: RubricMode


class ScoreResponse(BaseModel):
    kind: Literal["rewards"] = "rewards"
    rubric: RubricRef
    mode: RubricMode
    normalize: Normalize
    aggregation: Aggregation
    results: list[CompletionScore]
    pass_rates: dict[str, float | None] = Field(
        description="per criterion: mean probability of passing (required met, pitfall "
        "avoided) over the completions it was assessed on"
    )
    judge: RubricJudgeStamp
