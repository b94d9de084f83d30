"""Wire models of the versioned artifact store and its admin API (pydantic only): what the
store returns (artifacts, versions, events, diffs) and the admin routes' pages and requests."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from plaudit_wire.schemas import Page, StoredModel

#: A step of a diff path: an object key, a list position, or ``{"id": ...}`` for an item of a
#: list matched by id.
PathSegment = str | int | dict[str, str | int]

EventAction = Literal["create", "rollback", "promote"]


class PayloadInfo(BaseModel):
    """A version's file payload, stored under ``<data_dir>/<path>`` and never changed."""

    path: str = Field(description="folder relative to the data directory")
    files: int
    bytes: int
    sha256: str = Field(description="sha256 over every file's relative path and content")


class ArtifactInfo(BaseModel):
    """A named artifact: its kind and which version is current."""

    name: str
    kind: str
    current_version: int
    latest_version: int
    created_at: datetime
    updated_at: datetime
    owner: str | None = Field(description="the key that created it (a hash, never the key)")


class VersionInfo(BaseModel):
    """One immutable version, without its content (what listings show)."""

    name: str
    kind: str
    version: int
    parent_version: int | None = Field(description="the version that was current when written")
    content_hash: str
    created_at: datetime
    owner: str | None
    metadata: dict[str, Any]
    payload: PayloadInfo | None
    current: bool = Field(description="whether this version is the current one now")

    @property
    def ref(self) -> str:
        """``name@version``: what a consumer stamps on what this version produced."""
        return f"{self.name}@{self.version}"


class ArtifactVersion(VersionInfo):
    """One immutable version with its JSON content."""

    content: Any


class SavedVersion(BaseModel):
    """The answer to a write: the version, and whether this call created it (False when the
    content and metadata equalled the current version's, which is returned instead)."""

    version: ArtifactVersion
    created: bool


class ArtifactEvent(BaseModel):
    """One entry of an artifact's history: a version created, a rollback or a promotion."""

    id: int
    name: str
    action: EventAction
    from_version: int | None
    to_version: int
    owner: str | None
    note: str | None
    created_at: datetime


class PointerMove(BaseModel):
    """The artifact after a rollback or promotion, and the event recorded (None: no move)."""

    artifact: ArtifactInfo
    event: ArtifactEvent | None


class DiffEntry(BaseModel):
    """One difference: for ``added`` the value is ``new``, for ``removed`` it is ``old``."""

    path: str = Field(description="readable path, e.g. criteria[id=c1].text")
    at: list[PathSegment] = Field(description="the same path as segments")
    old: Any = None
    new: Any = None


class JsonDiff(BaseModel):
    """Added, removed and changed values between two JSON documents."""

    added: list[DiffEntry] = Field(default_factory=list)
    removed: list[DiffEntry] = Field(default_factory=list)
    changed: list[DiffEntry] = Field(default_factory=list)
    reordered: list[DiffEntry] = Field(
        default_factory=list, description="lists matched by id whose order changed (old/new ids)"
    )

    @property
    def empty(self) -> bool:
        return not (self.added or self.removed or self.changed or self.reordered)


class VersionDiff(BaseModel):
    """The content diff between two versions, plus what changed beside the content."""

    name: str
    from_version: int | None = Field(description="None: diffed against nothing (version 1)")
    to_version: int
    identical: bool = Field(description="same content hash")
    added: list[DiffEntry]
    removed: list[DiffEntry]
    changed: list[DiffEntry]
    reordered: list[DiffEntry]
    metadata: JsonDiff
    payload_changed: bool


class ArtifactPage(Page[ArtifactInfo]):
    """One page of artifacts, by name."""


class VersionPage(Page[VersionInfo]):
    """One page of an artifact's versions, newest first (without their content)."""


class EventPage(Page[ArtifactEvent]):
    """One page of an artifact's history, newest first."""


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
