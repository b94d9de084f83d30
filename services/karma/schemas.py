"""KARMA wire types (pydantic only): the training job's body, scoring, the models listing."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, field_validator

from plaudit_wire.limits import Text
from plaudit_wire.names import NO_NUL_PATTERN, ArtifactName, ArtifactRefStr
from plaudit_wire.schemas import Page, Prompt, StrictModel
from services.karma.training import KarmaTrainConfig

#: Which stored KARMA model to score with: the score route's and the ``karma`` channel's option.
ModelRefOption = Annotated[
    ArtifactRefStr | None,
    Field(
        description="'name' (its serving version) or 'name@N'; default the server's karma model",
    ),
]

MetadataValue = str | int | float | bool


class TrainRequest(KarmaTrainConfig):
    """``POST /v1/karma/train``: every option of ``plaudit karma train``, and where to save.

    ``data`` is ``reddit_karma`` (the shared data this server holds), or a JSONL file or a folder
    in the reddit_karma format on the server, under its data directory (a relative path is
    read from there) or another folder the server allows (``PLAUDIT_KARMA_DATA_ROOTS``).
    """

    name: ArtifactName = Field(
        default="karma",
        description="the artifact the model is saved under as a new version",
    )
    promote: bool = Field(
        default=False,
        description="serve the new version even when another one serves (the first version "
        "of a name always serves)",
    )
    note: str | None = Field(
        default=None, max_length=500, pattern=NO_NUL_PATTERN, description="kept in the history"
    )

    @field_validator("output_dir")
    @classmethod
    def _server_chooses(cls, value: Path | None) -> Path | None:
        if value is not None:
            raise ValueError("the server saves the model in its artifact store; leave it out")
        return value

    def config(self, output_dir: Path) -> KarmaTrainConfig:
        """The training run's config, writing the model directory to ``output_dir``."""
        fields = self.model_dump(exclude={"name", "promote", "note", "output_dir"})
        return KarmaTrainConfig(**fields, output_dir=output_dir)


class ScoreRequest(StrictModel):
    """A conversation and G candidate replies; optional metadata for ``with_metadata`` models."""

    context: Prompt
    replies: list[Text] = Field(min_length=1, max_length=1024)
    metadata: dict[str, MetadataValue] = Field(
        default_factory=dict,
        description="subreddit, depth, ... (read by with_metadata models, ignored by others)",
    )
    model: ModelRefOption = None


class ModelRef(BaseModel):
    """Which stored model produced a score."""

    name: str
    version: int
    variant: str | None = None


class ScoreResponse(BaseModel):
    """One score per reply, in order: higher means more karma expected (an unbounded logit)."""

    kind: Literal["rewards"] = "rewards"
    scores: list[float]
    model: ModelRef


class KarmaModelOut(BaseModel):
    """One trained version: its metrics and whether it serves."""

    name: str
    version: int
    serving: bool
    variant: str | None
    base_model: str | None
    metrics: dict[str, Any] = Field(description="test/dev pair accuracy, Spearman, baselines")
    created_at: datetime
    owner: str | None
    job_id: str | None = Field(default=None, description="the training job")
    bytes: int | None = Field(default=None, description="size of the model's files")


class KarmaModelPage(Page[KarmaModelOut]):
    """The versions of one model name, newest first, and which one serves."""

    name: str
    serving_version: int | None


class PromoteRequest(StrictModel):
    """Optional compare-and-set and a note for the history."""

    expected_version: int | None = Field(
        default=None, ge=1, description="the serving version you based this on (409 if stale)"
    )
    note: str | None = Field(default=None, max_length=500, pattern=NO_NUL_PATTERN)


class PromoteResponse(BaseModel):
    name: str
    serving_version: int
    previous_version: int | None
    moved: bool
