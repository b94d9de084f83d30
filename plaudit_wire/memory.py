"""Wire models of the evaluation memory (pydantic only: no FastAPI, no torch).

The admin API's shapes (README.md, `/v1/memory`) are what the admin page reads: fields may be
added, never renamed.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, model_validator

from plaudit_wire.names import NO_NUL_PATTERN
from plaudit_wire.rubrics import RubricOut, RubricReference
from plaudit_wire.schemas import INT32_MAX, Completions, Id, Prompt, StoredModel, StrictModel

RecordKind = Literal["rollout_analysis", "step_summary", "rubric_update"]
#: ``approving``: an admin's approval of a held revision is being applied (a moment).
RevisionState = Literal["queued", "running", "applied", "held", "approving", "rejected", "failed"]
CriterionKey = Annotated[str, Field(min_length=1, max_length=20, pattern=NO_NUL_PATTERN)]
Probability = Annotated[float, Field(ge=0, le=1)]
#: Issue 23: a reward the step statistics can square and sum without overflowing (1e308
#: did, and its step was never summarised).
MAX_REWARD = 1e9
Reward = Annotated[float, Field(ge=-MAX_REWARD, le=MAX_REWARD, allow_inf_nan=False)]


class Flag(BaseModel):
    kind: str = Field(description="reward_hacking, ...")
    step: int | None
    detail: str


class RunItem(BaseModel):
    run_id: str
    rubric_id: str
    rubric_version: int | None = Field(description="the rubric's current version")
    steps: int = Field(description="steps the memory summarised or holds groups of")
    last_step: int | None
    paused: bool
    flags: list[Flag]
    revise_every: int
    updated_at: str


class CurvePoint(BaseModel):
    step: int
    reward_mean: float | None
    reward_std: float | None
    rubric_version: int | None
    pass_rates: dict[str, float | None]


class CriterionLabel(BaseModel):
    id: str
    text: str
    kind: str = "required"
    anchor: bool = False


class RunDetail(RunItem):
    curve: list[CurvePoint]
    criteria: list[CriterionLabel] = Field(description="of the current version")
    rubrics: list[str] = Field(
        default_factory=list, description="every rubric this run's memory holds (?rubric_id=)"
    )


class StepStatsOut(BaseModel):
    reward_mean: float | None
    reward_std: float | None
    pass_rates: dict[str, float | None]
    saturated: list[str]
    non_separating: list[str]
    groups: int = 0
    completions: int = 0
    length_corr: float | None = None


class StepOut(BaseModel):
    id: str = Field(description="the step summary's record id")
    step: int
    rubric_id: str
    rubric_version: int | None
    stats: StepStatsOut
    summary: str
    created_at: str


class AnalysisOut(BaseModel):
    id: str
    rollout_index: int
    text: str
    reward: float | None
    verdicts: dict[str, float | None]
    hacking: bool
    analyst_status: str = Field(description="ok, or why the analyst's reply was not used")


class StepDetail(StepOut):
    analyses: list[AnalysisOut]


class RecordOut(BaseModel):
    id: str
    run_id: str | None
    rubric_id: str
    kind: RecordKind
    step: int | None
    text: str
    data: dict[str, Any]
    created_at: str


class ScoredRecordOut(RecordOut):
    score: float


class SearchRequest(StrictModel):
    """``{"run_id": "r1", "text": "criteria saturate", "budget": 2000}``: budget in characters."""

    run_id: Id
    text: str = Field(min_length=1, max_length=4000)
    budget: int = Field(default=2400, ge=1, le=100_000, description="characters of record text")
    rubric_id: str | None = Field(default=None, pattern=r"^rb_[0-9a-f]{1,40}$")


class SearchResponse(BaseModel):
    static: list[RecordOut]
    dynamic: list[ScoredRecordOut]
    used: int = Field(description="characters of record text returned")


class RevisionOut(BaseModel):
    id: str
    run_id: str
    rubric_id: str
    job_id: str | None
    step: int
    state: RevisionState
    from_version: int | None
    to_version: int | None
    operations: list[dict[str, Any]]
    rationale: str | None
    evidence: list[str]
    reason: str | None
    detail: dict[str, Any]
    created_at: str
    updated_at: str


class PauseOut(BaseModel):
    run_id: str
    paused: bool
    rubrics: list[str] = Field(default_factory=list)


class RollbackBody(StoredModel):
    """``{"version": 1, "reason": "edit was wrong", "run_id": "r1"}``"""

    version: int = Field(ge=1, le=INT32_MAX)
    reason: str | None = Field(default=None, max_length=1000)
    run_id: Id | None = None


class RollbackOut(BaseModel):
    rubric: RubricOut
    record: RecordOut


class IngestGroup(StrictModel):
    """One group scored elsewhere: its completions, rewards and per-criterion P(met)."""

    prompt: Prompt
    completions: Completions = Field(min_length=1)
    rewards: list[Reward | None]
    verdicts: list[dict[CriterionKey, Probability | None]]

    @model_validator(mode="after")
    def _one_per_completion(self) -> IngestGroup:
        g = len(self.completions)
        if len(self.rewards) != g or len(self.verdicts) != g:
            raise ValueError(f"rewards and verdicts need one entry per completion ({g})")
        return self

    @model_validator(mode="after")
    def _storable(self) -> IngestGroup:
        """Refused before the 202 (issue 23): Postgres cannot store NUL in text, and a group
        accepted and then refused by the database would be dropped after the answer."""
        prompt = [self.prompt] if isinstance(self.prompt, str) else self.prompt
        texts = [p if isinstance(p, str) else p.content for p in prompt]
        if any("\x00" in t for t in [*texts, *(c.text for c in self.completions)]):
            raise ValueError("the prompt and completions must not contain NUL (\\u0000)")
        return self


class IngestRequest(StrictModel):
    """``POST /v1/memory/runs/{run_id}/steps/{step}``: groups a trainer scored elsewhere."""

    rubric_id: RubricReference = Field(description="rb_... or rb_...@N (the version used)")
    groups: list[IngestGroup] = Field(min_length=1, max_length=256)
    close: bool = Field(default=False, description="the step is complete: summarise it now")


class IngestOut(BaseModel):
    run_id: str
    step: int
    accepted: int
    dropped: int


class IngestStatus(BaseModel):
    """``GET /v1/memory/ingest``: what this process's ingest queue took, retried and dropped.

    Example: ``{"accepted": 120, "retried": 1, "dropped": 2, "dropped_by_reason":
    {"queue_full": 2}, "last_drop": null, "depth": 0}``
    """

    accepted: int = Field(description="groups queued since the process started")
    retried: int = Field(description="transient storage failures that were retried")
    dropped: int = Field(description="groups that were never stored (dropped_total)")
    dropped_by_reason: dict[str, int] = Field(
        description="queue_full (the queue was full; the answer said dropped) or store_failed "
        "(storing failed after retries)"
    )
    last_drop: str | None = Field(description="why the latest store_failed group failed")
    depth: int = Field(description="groups waiting now")
