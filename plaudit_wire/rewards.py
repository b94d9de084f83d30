"""Wire models of the composite rewards endpoints (pydantic only: no FastAPI, no torch)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, model_validator

from plaudit_wire.names import ArtifactName
from plaudit_wire.schemas import (
    INT32_MAX,
    Completions,
    Count,
    FinishReasons,
    Id,
    Prompt,
    RunTag,
    StoredModel,
    StrictModel,
)

AdvantageName = Literal["none", "grpo", "odrpo"]
Kind = Literal["rewards", "advantages"]
ColumnName = Annotated[str, Field(min_length=1, max_length=200)]
ColumnValue = Annotated[str, Field(max_length=10_000)] | int | float | bool | None


class RewardsGroupRequest(RunTag):
    """One prompt, its G completions and the reward spec that scores them.

    Example::

        {"prompt": "2+2?", "completions": ["4", {"id": "b", "text": "5"}],
         "run_id": "r1", "step": 3,
         "spec": {"channels": {"judge_scale": {"weight": 1.0, "k": 5}}, "advantage": "grpo"}}

    ``spec`` is checked by :func:`services.rewards.spec.resolve_spec`, so a mistake
    is reported with the exact field (``spec.channels.foo``), like the validate endpoint does.
    """

    id: Id | None = Field(default=None, description="group id, echoed")
    prompt: Prompt
    completions: Completions = Field(min_length=1)
    finish_reasons: FinishReasons | None = Field(
        default=None, description="per completion ('length' = truncated), as trainers report"
    )
    token_counts: list[Count] | None = Field(
        default=None, description="per completion token counts (judge length discount)"
    )
    spec: Any = Field(
        description='{"channels": {name: {"weight": w, ...options}}, "advantage": "none"}, '
        'or a saved spec\'s name ("my-spec", the current version) or "my-spec@3"'
    )
    columns: dict[ColumnName, ColumnValue] | None = Field(
        default=None,
        max_length=32,
        description="dataset columns of this prompt that channels read, e.g. "
        '{"rubric_id": "rb_...@2"} for the rubric channel (TRL passes them to reward functions)',
    )

    @model_validator(mode="after")
    def _one_entry_per_completion(self) -> RewardsGroupRequest:
        g = len(self.completions)
        for name in ("finish_reasons", "token_counts"):
            values = getattr(self, name)
            if values is not None and len(values) != g:
                raise ValueError(f"{name} needs one entry per completion ({g})")
        return self


class ValidateRequest(StrictModel):
    """A dry run: ``{"spec": {"channels": {"diversity": {"weight": 0.5}}}}``."""

    spec: Any = Field(description="the reward spec to check")


class SpecError(BaseModel):
    param: str
    message: str


class ValidateResponse(BaseModel):
    """``valid`` with the resolved spec and its hash, or the list of problems."""

    valid: bool
    spec: dict[str, Any] | None = None
    spec_hash: str | None = None
    group_channels: list[str] = Field(
        default_factory=list,
        description="the spec's channels that compare a group's completions: send whole "
        "groups (or use the trainer protocols' buffering) when this is not empty",
    )
    channel_ranges: dict[str, list[float] | None] = Field(
        default_factory=dict,
        description="each channel's value range [low, high] under this spec (null when "
        "unbounded): what a client needs to map totals onto 0..1",
    )
    errors: list[SpecError] = Field(default_factory=list)


class ChannelResult(BaseModel):
    """One channel's value for one completion, its status and what produced it."""

    value: float | None
    status: str
    meta: dict[str, Any]
    detail: dict[str, Any] = Field(default_factory=dict)
    error: str | None = None


class CompletionReward(BaseModel):
    id: str
    total: float | None = Field(description="sum of weight * value; null when a channel failed")
    advantage: float | None = None
    status: str
    channels: dict[str, ChannelResult]


class ChannelStats(BaseModel):
    """A channel's mean and std over the completions with a total, and how often it failed."""

    mean: float | None
    std: float | None
    failed: int


class RewardStats(BaseModel):
    """Over the completions with a total (failed ones are excluded)."""

    mean: float | None
    std: float | None
    ok: int
    failed: int
    per_channel: dict[str, ChannelStats]


class RewardsGroupResponse(BaseModel):
    kind: Kind
    id: str | None = None
    spec_hash: str
    spec_name: str | None = Field(
        default=None, description="the named spec that scored it (None for an inline spec)"
    )
    spec_version: int | None = None
    advantage: AdvantageName
    results: list[CompletionReward]
    stats: RewardStats

    def wire(self) -> dict[str, Any]:
        """The JSON body: per-completion ``advantage`` only when advantages were asked for."""
        if self.kind == "advantages":
            return self.model_dump()
        return self.model_dump(exclude={"results": {"__all__": {"advantage"}}})


class SpecSaveRequest(StoredModel):
    """Save a reward spec under a name: ``{"name": "helpful", "spec": {"channels": {...}}}``."""

    name: ArtifactName = Field(description="1 to 128 letters, digits, '.', '_' and '-'")
    spec: Any = Field(description="the reward spec, checked like a scoring request's")
    expected_version: int | None = Field(
        default=None,
        ge=0,
        le=INT32_MAX,
        description="the current version you started from (0: the name must be new); a stale "
        "one is a 409",
    )
    shared: bool = Field(
        default=False,
        description="admin only: save it for every tenant to score with; otherwise the spec "
        "belongs to your API key and other keys cannot see it",
    )


class NamedSpec(BaseModel):
    """A saved reward spec version: what ``"spec": "name@version"`` scores with."""

    name: str
    owner: str | None = Field(
        default=None,
        description="the API key's owner id whose spec this is; null for a shared spec (an "
        "admin names another key's spec '<owner>~<name>')",
    )
    version: int
    spec: dict[str, Any]
    spec_hash: str
    current: bool
    created: bool = Field(default=False, description="whether this call made the version")
    created_at: str
