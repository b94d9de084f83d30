"""Wire models of the ordinal service."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, model_validator
from typing_extensions import TypedDict

from plaudit_wire.schemas import Id, RunTag, StrictModel

EstimatorName = Literal["odrpo", "grpo", "maxrl", "dr_grpo"]
K = Field(ge=2, le=100)


class GroupIn(StrictModel):
    """One rollout group's judge scores."""

    id: Id | None = None
    scores: list[float] = Field(min_length=1, description="one score per completion, in order")
    k: int | None = Field(default=None, ge=2, le=100, description="this group's scale 1..K")


class AdvantagesRequest(RunTag):
    """Score groups into advantages.

    Example: ``{"groups": [{"id": "g1", "scores": [1, 3, 5, 5]}], "k": 5, "estimator": "odrpo"}``
    """

    groups: list[GroupIn] = Field(min_length=1)
    k: int | None = Field(default=None, ge=2, le=100, description="scale 1..K for every group")
    estimator: EstimatorName = "odrpo"
    eps: float = Field(default=1e-6, ge=0, le=1)
    step_scaling: Literal["std", "mean", "none"] = Field(
        default="std",
        description="ODRPO per-threshold scaling: sqrt(p(1-p)) (GRPO-style), p (MaxRL-style), "
        "or none (then ODRPO equals mean-centred GRPO)",
    )
    threshold_weights: list[float] | None = Field(
        default=None, description="K-1 weights for thresholds 2..K (ODRPO only)"
    )
    normalize_thresholds: bool = Field(
        default=False, description="divide the ODRPO sum by K-1 (METHODS.md: optional 1/(K-1))"
    )
    bin_edges: list[float] | None = Field(
        default=None,
        description="ascending edges that map non-integer scores to levels 1..len(edges)+1",
    )

    @model_validator(mode="after")
    def _odrpo_only_fields(self) -> AdvantagesRequest:
        if self.threshold_weights is not None and self.estimator != "odrpo":
            raise ValueError("threshold_weights applies to the odrpo estimator only")
        return self


class ThresholdOut(TypedDict):
    """One ladder step of a group: its threshold, the share that passed it, and whether it
    carried signal (0 < pass_rate < 1). A TypedDict, because a large request has many."""

    k: int
    pass_rate: float
    active: bool


class GroupOut(BaseModel):
    id: str
    advantages: list[float]
    levels: list[int]
    thresholds: list[ThresholdOut] | None = None


class AdvantagesResponse(BaseModel):
    kind: Literal["advantages"] = "advantages"
    estimator: EstimatorName
    groups: list[GroupOut]


class DecomposeRequest(StrictModel):
    """``{"scores": [1, 3, 5], "k": 5}`` -> the binary ladder of each score."""

    scores: list[float] = Field(min_length=1)
    k: int | None = Field(default=None, ge=2, le=100)
    bin_edges: list[float] | None = None


class DecomposeResponse(BaseModel):
    k: int
    thresholds: list[int]
    levels: list[int]
    indicators: list[list[int]]
