"""Wire models of the runs listing (pydantic only)."""

from __future__ import annotations

from pydantic import BaseModel, Field


class SpecUse(BaseModel):
    """A reward spec a run was scored with: its hash, and name@version when it was named."""

    hash: str | None
    name: str | None = None
    version: int | None = None


class RunSummary(BaseModel):
    """One run: how many groups were stored for it, its steps and what scored it."""

    run_id: str
    groups: int
    first_step: int | None
    last_step: int | None
    first_at: str
    last_at: str
    services: list[str] = Field(description="the services that stored its groups")
    specs: list[SpecUse] = Field(description="the reward specs its rewards groups used")
