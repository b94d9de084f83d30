"""The artifacts admin service: listings, versions, diffs and pointer moves (no HTTP)."""

from __future__ import annotations

from plaudit_wire.artifacts import (
    ArtifactDetail,
    ArtifactPage,
    ArtifactVersion,
    EventPage,
    MoveRequest,
    PointerMove,
    VersionDiff,
    VersionPage,
)
from services.core.store.artifacts import ArtifactStore
from services.core.store.refs import check_name, parse_ref


class ArtifactAdminService:
    """What an admin may see and do with any artifact, whatever its kind."""

    def __init__(self, store: ArtifactStore) -> None:
        self.store = store

    async def artifacts(self, *, kind: str | None, limit: int, offset: int) -> ArtifactPage:
        items, total = await self.store.list_artifacts(kind=kind, limit=limit, offset=offset)
        return ArtifactPage(items=items, limit=limit, offset=offset, total=total)

    async def detail(self, ref: str) -> ArtifactDetail:
        """``name`` (its current version) or ``name@N``."""
        parsed = parse_ref(ref, param="name")
        version = await self.store.get(parsed.name, parsed.version)
        return ArtifactDetail(artifact=await self.store.info(parsed.name), version=version)

    async def versions(self, name: str, *, limit: int, offset: int) -> VersionPage:
        check_name(name)
        items, total = await self.store.list_versions(name, limit=limit, offset=offset)
        return VersionPage(items=items, limit=limit, offset=offset, total=total)

    async def version(self, name: str, version: int) -> ArtifactVersion:
        return await self.store.get(check_name(name), version)

    async def diff(
        self, name: str, from_version: int | None, to_version: int | None
    ) -> VersionDiff:
        return await self.store.diff(check_name(name), from_version, to_version)

    async def rollback(self, name: str, body: MoveRequest, owner: str | None) -> PointerMove:
        return await self.store.rollback(
            check_name(name),
            body.to,
            expected_version=body.expected_version,
            owner=owner,
            note=body.note,
        )

    async def promote(self, name: str, body: MoveRequest, owner: str | None) -> PointerMove:
        return await self.store.promote(
            check_name(name),
            body.to,
            expected_version=body.expected_version,
            owner=owner,
            note=body.note,
        )

    async def history(self, name: str, *, limit: int, offset: int) -> EventPage:
        check_name(name)
        items, total = await self.store.history(name, limit=limit, offset=offset)
        return EventPage(items=items, limit=limit, offset=offset, total=total)
