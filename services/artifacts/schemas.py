"""Wire models of the artifacts admin API (pydantic only)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from plaudit_wire.schemas import StoredModel
from services.core.store.models import (
    ArtifactEvent,
    ArtifactInfo,
    ArtifactVersion,
    PointerMove,
    VersionDiff,
    VersionInfo,
)

__all__ = [
    "ArtifactDetail",
    "ArtifactEvent",
    "ArtifactInfo",
    "ArtifactPage",
    "ArtifactVersion",
    "EventPage",
    "MoveRequest",
    "PointerMove",
    "VersionDiff",
    "VersionInfo",
    "VersionPage",
]


class ArtifactPage(BaseModel):
    """One page of artifacts, by name."""

    items: list[ArtifactInfo]
    limit: int
    offset: int
    total: int


class VersionPage(BaseModel):
    """One page of an artifact's versions, newest first (without their content)."""

    items: list[VersionInfo]
    limit: int
    offset: int
    total: int


class EventPage(BaseModel):
    """One page of an artifact's history, newest first."""

    items: list[ArtifactEvent]
    limit: int
    offset: int
    total: int


class ArtifactDetail(BaseModel):
    """An artifact and one of its versions with content: the current one, or ``name@N``."""

    artifact: ArtifactInfo
    version: ArtifactVersion


class MoveRequest(StoredModel):
    """Move the current pointer (rollback: to an older version; promote: to any version)."""

    to: int = Field(ge=1, le=10**9, description="the version to make current")
    expected_version: int | None = Field(
        default=None, ge=1, le=10**9, description="409 unless this is the current version now"
    )
    note: str | None = Field(default=None, max_length=500, description="why, for the history")
