"""Rows of the artifact store: building records, checking pointer moves, and turning rows
into the store's answers."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, cast

from plaudit_wire.artifacts import (
    ArtifactEvent,
    ArtifactInfo,
    ArtifactVersion,
    PayloadInfo,
    VersionInfo,
)
from services.core.db.tables import (
    Artifact,
    ArtifactEventRecord,
    ArtifactVersionRecord,
    as_utc,
    utcnow,
)
from services.core.errors import Conflict, InvalidInput, NotFound
from services.core.store import files as store_files


@dataclass(frozen=True)
class Draft:
    """A write in progress, retried as a whole when another writer wins the race."""

    name: str
    kind: str
    content: Any
    digest: str
    metadata: dict[str, Any]
    staged: store_files.StagedPayload | None
    expected: int | None
    owner: str | None
    note: str | None
    make_current: bool = True


def unchanged(current: ArtifactVersionRecord, draft: Draft) -> bool:
    return (
        draft.staged is None
        and current.content_hash == draft.digest
        and (current.meta or {}) == draft.metadata
    )


def event_record(
    name: str,
    action: str,
    from_version: int | None,
    to_version: int,
    owner: str | None,
    note: str | None,
    now: datetime,
) -> ArtifactEventRecord:
    return ArtifactEventRecord(
        name=name,
        action=action,
        from_version=from_version,
        to_version=to_version,
        owner=owner,
        note=note,
        created_at=now,
    )


def version_record(
    draft: Draft, number: int, parent: int | None, payload: dict[str, Any] | None
) -> ArtifactVersionRecord:
    return ArtifactVersionRecord(
        name=draft.name,
        version=number,
        kind=draft.kind,
        content=draft.content,
        content_hash=draft.digest,
        parent_version=parent,
        owner=draft.owner,
        meta=draft.metadata,
        payload=payload,
        created_at=utcnow(),
    )


def payload_info(staged: store_files.StagedPayload, relative: Path) -> dict[str, Any]:
    return PayloadInfo(
        path=relative.as_posix(), files=staged.files, bytes=staged.bytes, sha256=staged.sha256
    ).model_dump()


def payload_hash(version: VersionInfo | None) -> str | None:
    return None if version is None or version.payload is None else version.payload.sha256


aware = as_utc  # the store's name for the one helper (services.core.db.tables.as_utc)


def info_out(row: Artifact) -> ArtifactInfo:
    return ArtifactInfo(
        name=row.name,
        kind=row.kind,
        current_version=row.current_version,
        latest_version=row.latest_version,
        created_at=aware(row.created_at),
        updated_at=aware(row.updated_at),
        owner=row.owner,
    )


def version_fields(row: ArtifactVersionRecord, current_version: int) -> dict[str, Any]:
    return {
        "name": row.name,
        "kind": row.kind,
        "version": row.version,
        "parent_version": row.parent_version,
        "content_hash": row.content_hash,
        "created_at": aware(row.created_at),
        "owner": row.owner,
        "metadata": row.meta or {},
        "payload": row.payload,
        "current": row.version == current_version,
    }


def version_out(row: ArtifactVersionRecord, current_version: int) -> ArtifactVersion:
    return ArtifactVersion(**version_fields(row, current_version), content=row.content)


def event_out(row: ArtifactEventRecord) -> ArtifactEvent:
    return ArtifactEvent(
        id=row.id,
        name=row.name,
        action=cast(Any, row.action),
        from_version=row.from_version,
        to_version=row.to_version,
        owner=row.owner,
        note=row.note,
        created_at=aware(row.created_at),
    )


def check_expected(name: str, expected: int | None, current: int) -> None:
    if expected is not None and expected != current:
        raise Conflict(
            f"{name!r} is at version {current}, not {expected}: re-read it and retry",
            param="expected_version",
        )


def check_move(action: str, artifact: Artifact, to: int, expected: int | None) -> None:
    if not 1 <= to <= artifact.latest_version:
        raise NotFound(
            f"{artifact.name!r} has no version {to} (versions 1 to {artifact.latest_version})",
            param="to",
        )
    check_expected(artifact.name, expected, artifact.current_version)
    if action == "rollback" and to > artifact.current_version:
        raise InvalidInput(
            f"a rollback goes back: {artifact.name!r} is at version "
            f"{artifact.current_version}; promote to move it forward",
            param="to",
        )


def check_author(owner: str | None, note: str | None) -> None:
    """The owner is a key's short id (``key_`` + 16 hex digits) and a note fits its column."""
    if owner is not None and len(owner) > 40:
        raise InvalidInput("owner must be a short key id (at most 40 characters)", param="owner")
    if note is not None and len(note) > 500:
        raise InvalidInput("a note holds at most 500 characters", param="note")
