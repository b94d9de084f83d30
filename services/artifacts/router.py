"""HTTP routes of the artifacts admin API: thin handlers over ArtifactAdminService."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Request

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
from plaudit_wire.names import KIND_PATTERN
from services.artifacts.service import ArtifactAdminService
from services.core.settings import Scope
from services.core.web.auth import principal_of, require_scope
from services.core.web.deps import PathName, PathRef, service_of
from services.core.web.paging import Paging

router = APIRouter(
    prefix="/v1/artifacts",
    tags=["artifacts"],
    dependencies=[Depends(require_scope(Scope.admin))],
)

Version = Annotated[int, Path(ge=1, le=10**9, description="a version number")]


async def _service(request: Request) -> ArtifactAdminService:
    service: ArtifactAdminService = service_of(request, ArtifactAdminService)
    return service


Service = Annotated[ArtifactAdminService, Depends(_service)]


async def _caller(request: Request) -> str | None:
    return principal_of(request)


Caller = Annotated[str | None, Depends(_caller)]


@router.get("")
async def artifacts(
    page: Paging,
    service: Service,
    kind: Annotated[str | None, Query(pattern=f"^{KIND_PATTERN.pattern}$", max_length=64)] = None,
) -> ArtifactPage:
    """Every artifact by name (``kind``: only rubrics, reward specs, ...)."""
    return await service.artifacts(kind=kind, limit=page.limit, offset=page.offset)


@router.get("/{ref}")
async def artifact(ref: PathRef, service: Service) -> ArtifactDetail:
    """An artifact with its current version (``name``) or a given one (``name@3``)."""
    return await service.detail(ref)


@router.get("/{name}/versions")
async def versions(name: PathName, service: Service, page: Paging) -> VersionPage:
    """Its versions, newest first, without their content."""
    return await service.versions(name, limit=page.limit, offset=page.offset)


@router.get("/{name}/versions/{version}")
async def version(name: PathName, version: Version, service: Service) -> ArtifactVersion:
    """One version with its content."""
    return await service.version(name, version)


@router.get("/{name}/diff")
async def diff(
    name: PathName,
    service: Service,
    from_version: Annotated[int | None, Query(alias="from", ge=1, le=10**9)] = None,
    to_version: Annotated[int | None, Query(alias="to", ge=1, le=10**9)] = None,
) -> VersionDiff:
    """What changed between two versions (default: the current one against its parent)."""
    return await service.diff(name, from_version, to_version)


@router.post("/{name}/rollback")
async def rollback(
    name: PathName, body: MoveRequest, service: Service, caller: Caller
) -> PointerMove:
    """Make an older version current again; recorded in the history, nothing is deleted."""
    return await service.rollback(name, body, caller)


@router.post("/{name}/promote")
async def promote(
    name: PathName, body: MoveRequest, service: Service, caller: Caller
) -> PointerMove:
    """Make any version current (for instance a newer one after a rollback); recorded."""
    return await service.promote(name, body, caller)


@router.get("/{name}/history")
async def history(name: PathName, service: Service, page: Paging) -> EventPage:
    """Creations, rollbacks and promotions, newest first."""
    return await service.history(name, limit=page.limit, offset=page.offset)
