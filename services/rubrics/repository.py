"""Where rubrics are kept: versions of artifacts of kind ``rubric`` in the one artifact store.

The service sees only :class:`RubricRepository`; :class:`ArtifactRubricRepository` maps it onto
:class:`~services.core.store.artifacts.ArtifactStore` (issue 20: one versioned store). A rubric
is the artifact named by its id (``rb_...``); each rubric version is the artifact version of
the same number, its content the rubric's content, and its metadata the next free criterion
number and the edit's note. The owner is the artifact's owner; a rollback moves the store's
current pointer and is recorded as the store's event, so ``/v1/artifacts?kind=rubric``,
``/v1/artifacts/rb_...@N``, its diff, history, rollback and promotion all work on rubrics.
Writes are the store's compare-and-set: of two concurrent editors exactly one wins and the
other gets 409.

Tenancy: a caller sees the rubrics its key wrote (an admin, or an open server, sees all); a
rubric it may not see is reported as unknown.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from plaudit_wire.artifacts import ArtifactInfo, ArtifactVersion
from services.core.context import current_principal
from services.core.errors import NotFound
from services.core.store.artifacts import ArtifactStore

#: The artifact kind of a rubric.
KIND = "rubric"
#: An event note's limit in the store; a longer rubric note is kept whole in the version.
_EVENT_NOTE = 500


@dataclass(frozen=True)
class RubricHead:
    """A rubric's head row."""

    id: str
    owner: str | None
    name: str | None
    domain: str | None
    source: str | None
    current_version: int
    latest_version: int
    next_criterion: int
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class RubricVersion:
    """One stored version: its content (a ``RubricContent`` as a dict) and when it was made."""

    rubric_id: str
    version: int
    content: dict[str, Any]
    content_hash: str
    note: str | None
    created_at: datetime


@dataclass(frozen=True)
class NewRubric:
    """A rubric to create: its first version's content and the next free criterion number."""

    content: dict[str, Any]
    next_criterion: int


@dataclass(frozen=True)
class ListFilter:
    name: str | None = None
    domain: str | None = None
    source: str | None = None


class RubricRepository(Protocol):
    """Rubrics with immutable versions and a current pointer, seen through the caller."""

    async def create(
        self, rubrics: list[NewRubric], ids: list[str] | None = None
    ) -> list[tuple[RubricHead, RubricVersion]]:
        """Store each rubric as version 1, all in one transaction; owner = the caller."""
        ...

    async def head(self, rubric_id: str) -> RubricHead | None:
        """The rubric, or None when it is unknown or not the caller's."""
        ...

    async def version(self, rubric_id: str, version: int) -> RubricVersion | None: ...

    async def versions(self, rubric_id: str) -> list[RubricVersion]:
        """Every version, oldest first."""
        ...

    async def add_version(
        self, head: RubricHead, content: dict[str, Any], next_criterion: int, note: str | None
    ) -> tuple[RubricHead, RubricVersion]:
        """Version ``latest + 1``, made current; Conflict (409) when ``head`` is stale."""
        ...

    async def set_current(
        self, head: RubricHead, version: RubricVersion, note: str | None = None
    ) -> RubricHead:
        """Make an existing version current (the move recorded with ``note``); Conflict (409)
        when ``head`` is stale."""
        ...

    async def page(
        self, where: ListFilter, *, limit: int, offset: int
    ) -> tuple[list[RubricHead], int]:
        """The caller's rubrics, most recently updated first, and how many in all."""
        ...


def new_rubric_id() -> str:
    return f"rb_{uuid.uuid4().hex[:20]}"


class ArtifactRubricRepository:
    """:class:`RubricRepository` over the artifact store."""

    def __init__(self, store: ArtifactStore) -> None:
        self._store = store

    async def create(
        self, rubrics: list[NewRubric], ids: list[str] | None = None
    ) -> list[tuple[RubricHead, RubricVersion]]:
        chosen = ids if ids is not None else [new_rubric_id() for _ in rubrics]
        items = [
            (rubric_id, rubric.content, _metadata(rubric.next_criterion, None))
            for rubric_id, rubric in zip(chosen, rubrics, strict=True)
        ]
        owner = current_principal().owner
        saved = await self._store.create_many(KIND, items, owner=owner)
        return [(_first_head(version, owner), _version(version)) for version in saved]

    async def head(self, rubric_id: str) -> RubricHead | None:
        try:
            info, current, latest = await self._store.pointers(rubric_id)
        except NotFound:
            return None
        if info.kind != KIND or not current_principal().sees(info.owner):
            return None
        return _head(info, current, latest)

    async def version(self, rubric_id: str, version: int) -> RubricVersion | None:
        try:
            found = await self._store.get(rubric_id, version)
        except NotFound:
            return None
        return _version(found) if found.kind == KIND else None

    async def versions(self, rubric_id: str) -> list[RubricVersion]:
        return [_version(v) for v in await self._store.all_versions(rubric_id)]

    async def add_version(
        self, head: RubricHead, content: dict[str, Any], next_criterion: int, note: str | None
    ) -> tuple[RubricHead, RubricVersion]:
        """The store's write; an edit equal to the current version (content and note) writes
        nothing and answers the current version, so a retried edit is harmless."""
        saved = await self._store.put(
            head.id,
            KIND,
            content,
            metadata=_metadata(next_criterion, note),
            expected_version=head.current_version,
            owner=current_principal().owner,
            note=_event_note(note),
        )
        version = saved.version
        if not saved.created:
            return head, _version(version)
        moved = RubricHead(
            **{
                **head.__dict__,
                **_listed(version.content),
                "current_version": version.version,
                "latest_version": version.version,
                "next_criterion": next_criterion,
                "updated_at": version.created_at,
            }
        )
        return moved, _version(version)

    async def set_current(
        self, head: RubricHead, version: RubricVersion, note: str | None = None
    ) -> RubricHead:
        move = (
            self._store.rollback if version.version < head.current_version else self._store.promote
        )
        moved = await move(
            head.id,
            version.version,
            expected_version=head.current_version,
            owner=current_principal().owner,
            # The route takes at most the store's 500 characters; the memory's admin rollback
            # (a reason of up to 1000) keeps the whole reason in its own record.
            note=_event_note(note),
        )
        return RubricHead(
            **{
                **head.__dict__,
                **_listed(version.content),
                "current_version": moved.artifact.current_version,
                "updated_at": moved.artifact.updated_at,
            }
        )

    async def page(
        self, where: ListFilter, *, limit: int, offset: int
    ) -> tuple[list[RubricHead], int]:
        principal = current_principal()
        owner = None if principal.admin else principal.owner
        fields = {"name": where.name, "domain": where.domain, "source": where.source}
        found, total = await self._store.page_current(
            KIND,
            owner=owner,
            content_equals={k: v for k, v in fields.items() if v is not None},
            limit=limit,
            offset=offset,
        )
        # A listing's heads carry the current version's next criterion number; edits read
        # the head again (``head``), which takes it from the latest version.
        return [_head(info, current, current) for info, current in found], total


def _metadata(next_criterion: int, note: str | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"next_criterion": next_criterion}
    if note is not None:
        meta["note"] = note
    return meta


def _event_note(note: str | None) -> str | None:
    return None if note is None else note[:_EVENT_NOTE]


def _listed(content: dict[str, Any]) -> dict[str, Any]:
    return {key: content.get(key) for key in ("name", "domain", "source")}


def _head(info: ArtifactInfo, current: ArtifactVersion, latest: ArtifactVersion) -> RubricHead:
    return RubricHead(
        id=info.name,
        owner=info.owner,
        current_version=info.current_version,
        latest_version=info.latest_version,
        next_criterion=int(latest.metadata.get("next_criterion", 1)),
        created_at=info.created_at,
        updated_at=info.updated_at,
        **_listed(current.content),
    )


def _first_head(version: ArtifactVersion, owner: str | None) -> RubricHead:
    return RubricHead(
        id=version.name,
        owner=owner,
        current_version=1,
        latest_version=1,
        next_criterion=int(version.metadata["next_criterion"]),
        created_at=version.created_at,
        updated_at=version.created_at,
        **_listed(version.content),
    )


def _version(found: ArtifactVersion) -> RubricVersion:
    return RubricVersion(
        rubric_id=found.name,
        version=found.version,
        content=dict(found.content),
        content_hash=found.content_hash,
        note=found.metadata.get("note"),
        created_at=found.created_at,
    )
