"""Where rubrics are kept: a small repository interface and its database implementation.

The service sees only :class:`RubricRepository`. :class:`SqlRubricRepository` keeps a head row
per rubric (``rubrics``: owner, current and latest version, the current name/domain/source for
listings) and one immutable row per version (``rubric_versions``). Writes are compare-and-set
on the head row, so of two concurrent editors exactly one wins and the other gets 409.

The same interface maps onto the versioned artifact store: a rubric is an artifact of kind
``rubric`` named by its id, each version's content is the artifact version's content, name,
domain, source and the next criterion number go in its metadata, the owner is the artifact's
owner, and a rollback moves the store's current pointer.

Tenancy: a caller sees the rubrics its key wrote (an admin, or an open server, sees all); a
rubric it may not see is reported as unknown.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from services.core.context import current_principal
from services.core.errors import Conflict
from services.core.models import RubricRecord, RubricVersionRecord, utcnow
from services.core.records import content_hash


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

    async def set_current(self, head: RubricHead, version: RubricVersion) -> RubricHead:
        """Make an existing version current; Conflict (409) when ``head`` is stale."""
        ...

    async def page(
        self, where: ListFilter, *, limit: int, offset: int
    ) -> tuple[list[RubricHead], int]:
        """The caller's rubrics, most recently updated first, and how many in all."""
        ...


def new_rubric_id() -> str:
    return f"rb_{uuid.uuid4().hex[:20]}"


class SqlRubricRepository:
    """:class:`RubricRepository` over the ``rubrics`` and ``rubric_versions`` tables."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self._sessions = sessions

    async def create(
        self, rubrics: list[NewRubric], ids: list[str] | None = None
    ) -> list[tuple[RubricHead, RubricVersion]]:
        owner = current_principal().owner
        now = utcnow()
        heads: list[RubricRecord] = []
        versions: list[RubricVersionRecord] = []
        for index, rubric in enumerate(rubrics):
            rubric_id = ids[index] if ids is not None else new_rubric_id()
            heads.append(
                RubricRecord(
                    id=rubric_id,
                    owner=owner,
                    current_version=1,
                    latest_version=1,
                    next_criterion=rubric.next_criterion,
                    created_at=now,
                    updated_at=now,
                    **_listed(rubric.content),
                )
            )
            versions.append(_version_record(rubric_id, 1, rubric.content, None, now))
        async with self._sessions() as session, session.begin():
            session.add_all(heads)
            await session.flush()
            session.add_all(versions)
        return [(_head(h), _version(v)) for h, v in zip(heads, versions, strict=True)]

    async def head(self, rubric_id: str) -> RubricHead | None:
        async with self._sessions() as session:
            row = await session.get(RubricRecord, rubric_id)
        if row is None or not current_principal().sees(row.owner):
            return None
        return _head(row)

    async def version(self, rubric_id: str, version: int) -> RubricVersion | None:
        async with self._sessions() as session:
            row = await session.get(RubricVersionRecord, (rubric_id, version))
        return None if row is None else _version(row)

    async def versions(self, rubric_id: str) -> list[RubricVersion]:
        query = (
            select(RubricVersionRecord)
            .where(RubricVersionRecord.rubric_id == rubric_id)
            .order_by(RubricVersionRecord.version)
        )
        async with self._sessions() as session:
            return [_version(row) for row in (await session.scalars(query)).all()]

    async def add_version(
        self, head: RubricHead, content: dict[str, Any], next_criterion: int, note: str | None
    ) -> tuple[RubricHead, RubricVersion]:
        now = utcnow()
        number = head.latest_version + 1
        record = _version_record(head.id, number, content, note, now)
        values = {
            "current_version": number,
            "latest_version": number,
            "next_criterion": next_criterion,
            "updated_at": now,
            **_listed(content),
        }
        async with self._sessions() as session, session.begin():
            await self._swap(session, head, values)
            session.add(record)
        return _moved(head, values), _version(record)

    async def set_current(self, head: RubricHead, version: RubricVersion) -> RubricHead:
        values = {
            "current_version": version.version,
            "updated_at": utcnow(),
            **_listed(version.content),
        }
        async with self._sessions() as session, session.begin():
            await self._swap(session, head, values)
        return _moved(head, values)

    async def page(
        self, where: ListFilter, *, limit: int, offset: int
    ) -> tuple[list[RubricHead], int]:
        clauses = _visible()
        for column, value in (
            (RubricRecord.name, where.name),
            (RubricRecord.domain, where.domain),
            (RubricRecord.source, where.source),
        ):
            if value is not None:
                clauses.append(column == value)
        query = (
            select(RubricRecord)
            .where(*clauses)
            .order_by(RubricRecord.updated_at.desc(), RubricRecord.id)
            .limit(limit)
            .offset(offset)
        )
        async with self._sessions() as session:
            count = select(func.count()).select_from(RubricRecord).where(*clauses)
            total = await session.scalar(count)
            rows = (await session.scalars(query)).all()
        return [_head(row) for row in rows], int(total or 0)

    async def _swap(self, session: AsyncSession, head: RubricHead, values: dict[str, Any]) -> None:
        """Move the head from the state ``head`` saw; Conflict when another writer moved it."""
        result = await session.execute(
            update(RubricRecord)
            .where(
                RubricRecord.id == head.id,
                RubricRecord.latest_version == head.latest_version,
                RubricRecord.current_version == head.current_version,
            )
            .values(**values)
        )
        if getattr(result, "rowcount", 0) != 1:
            raise Conflict(
                f"rubric {head.id} changed while this edit was made; read it again and retry",
                param="expected_version",
            )


def _visible() -> list[Any]:
    principal = current_principal()
    if principal.admin or principal.owner is None:
        return []
    return [RubricRecord.owner == principal.owner]


def _listed(content: dict[str, Any]) -> dict[str, Any]:
    return {key: content.get(key) for key in ("name", "domain", "source")}


def _version_record(
    rubric_id: str, version: int, content: dict[str, Any], note: str | None, now: datetime
) -> RubricVersionRecord:
    return RubricVersionRecord(
        rubric_id=rubric_id,
        version=version,
        content=content,
        content_hash=content_hash(content),
        note=note,
        created_at=now,
    )


def _head(row: RubricRecord) -> RubricHead:
    return RubricHead(
        id=row.id,
        owner=row.owner,
        name=row.name,
        domain=row.domain,
        source=row.source,
        current_version=row.current_version,
        latest_version=row.latest_version,
        next_criterion=row.next_criterion,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def _moved(head: RubricHead, values: dict[str, Any]) -> RubricHead:
    data = {**head.__dict__, **values}
    return RubricHead(**data)


def _version(row: RubricVersionRecord) -> RubricVersion:
    return RubricVersion(
        rubric_id=row.rubric_id,
        version=row.version,
        content=dict(row.content),
        content_hash=row.content_hash,
        note=row.note,
        created_at=row.created_at,
    )
