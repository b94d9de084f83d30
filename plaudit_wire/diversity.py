"""Wire models of the diversity service."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from plaudit_wire.schemas import Completions, Id, ItemStatus, RunTag, StrictModel

MetricName = Literal["centroid", "pairwise_cosine"]
ScalingName = Literal["minmax", "none"]


class DiversityOptions(StrictModel):
    metric: MetricName = Field(
        default="centroid", description="centroid distance (PPR-GDE) or mean pairwise cosine"
    )
    scaling: ScalingName = Field(
        default="minmax", description="min-max within the group (PPR-GDE), or none (absolute)"
    )
    weight: float = Field(default=1.0, ge=0, le=100, description="lambda: reward = weight * div")
    min_range: float = Field(
        default=1e-6,
        ge=0,
        le=2,
        description="minmax gives all zeros when the group's distance range is below this",
    )


class DiversityRequest(DiversityOptions, RunTag):
    """Example: ``{"completions": ["a cat", "a dog", "stock prices"], "metric": "centroid"}``"""

    id: Id | None = Field(default=None, description="group id, echoed")
    completions: Completions = Field(min_length=2)


class GroupCompletions(StrictModel):
    id: Id | None = None
    completions: Completions = Field(min_length=2)


class DiversityBatchRequest(DiversityOptions, RunTag):
    """Many groups in one request (each scored within itself)."""

    groups: list[GroupCompletions] = Field(min_length=1)


class CompletionDiversity(BaseModel):
    id: str
    reward: float
    distance: float
    status: ItemStatus = "ok"


class GroupStats(BaseModel):
    mean_pairwise_cosine_distance: float
    distinct_1: float
    distinct_2: float
    distance_min: float
    distance_max: float


class DiversityResponse(BaseModel):
    kind: Literal["rewards"] = "rewards"
    id: str | None = None
    metric: MetricName
    scaling: ScalingName
    embedder: str
    rewards: list[float]
    results: list[CompletionDiversity]
    stats: GroupStats
    separable: bool = Field(
        default=True,
        description="false when min-max scaling could not tell the completions apart (their "
        "distances differ by less than min_range, as always with 2 completions and the "
        "centroid metric): every reward is then 0, and `note` says why",
    )
    note: str | None = None


class DiversityBatchResponse(BaseModel):
    kind: Literal["rewards"] = "rewards"
    groups: list[DiversityResponse]
