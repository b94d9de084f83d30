"""Wire models of the job API."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from plaudit_wire.schemas import Page, StrictModel

JobState = Literal["queued", "running", "succeeded", "failed", "cancelled"]
View = Literal["full", "summary"]


class JobProgress(BaseModel):
    done: int
    total: int | None
    stage: str | None
    fraction: float | None = Field(description="done / total, when the total is known")


class JobOut(BaseModel):
    """One job. ``params`` and ``result`` are left out of summaries (lists, events).

    Example: ``{"id": "5f0c...", "kind": "judge.evaluation", "state": "running",
    "progress": {"done": 12, "total": 40, "stage": "judging votes", "fraction": 0.3}, ...}``
    """

    id: str
    kind: str
    state: JobState
    progress: JobProgress
    owner: str | None = Field(description="who started it: a short hash of the API key")
    cancel_requested: bool
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    worker: str | None = Field(description="the process holding it (host:pid:role-token)")
    attempts: int = Field(
        description="how many times a process started it: more than 1 when a process died "
        "(or stopped) while running it and it was run again from its last checkpoint"
    )
    error: str | None
    params: dict[str, Any] | None = None
    result: Any = None


#: A page of jobs: the one listing shape (plaudit_wire.schemas.Page).
JobPage = Page[JobOut]


class ProbeRequest(StrictModel):
    """A diagnostic job that counts steps: checks that workers pick up and report jobs.

    Example: ``{"steps": 5, "delay_s": 0.5}``
    """

    steps: int = Field(default=10, ge=1, le=1000)
    delay_s: float = Field(default=0.1, ge=0, le=10, description="sleep before each step")
    fail_at: int | None = Field(
        default=None, ge=1, le=1000, description="raise at this step (checks failure reporting)"
    )
