"""HTTP routes of the composite rewards service: thin handlers over RewardsService."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse

from plaudit_wire.rewards import (
    NamedSpec,
    RewardsGroupRequest,
    RewardsGroupResponse,
    SpecSaveRequest,
    ValidateRequest,
    ValidateResponse,
)
from plaudit_wire.schemas import Page, ScoredGroupPage
from services.core.settings import Scope
from services.core.web.auth import require_scope
from services.core.web.deps import (
    IdempotencyKey,
    PathId,
    PathOwnedRef,
    ResourcesDep,
    replayable,
    service_of,
)
from services.core.web.paging import Paging
from services.rewards.service import RewardsService

router = APIRouter(
    prefix="/v1/rewards", tags=["rewards"], dependencies=[Depends(require_scope(Scope.reward))]
)


async def _service(request: Request) -> RewardsService:
    service: RewardsService = service_of(request, RewardsService)
    return service


Service = Annotated[RewardsService, Depends(_service)]


@router.post("/group", response_model=RewardsGroupResponse)
async def group(
    body: RewardsGroupRequest,
    service: Service,
    resources: ResourcesDep,
    key: IdempotencyKey = None,
) -> JSONResponse:
    """Weighted multi-channel rewards (or advantages) for one prompt's G completions."""
    return await replayable(
        resources, key, "rewards.group", body, lambda: _wire(service.group(body))
    )


@router.post("/validate")
async def validate(body: ValidateRequest, service: Service) -> ValidateResponse:
    """Check a reward spec: the resolved spec (defaults filled) and its hash, or the errors."""
    return service.validate(body)


@router.post("/specs", status_code=201)
async def save_spec(body: SpecSaveRequest, service: Service) -> NamedSpec:
    """Save a reward spec under a name (a new version when it changed); score with
    ``"spec": "name"`` (the current version) or ``"name@N"``."""
    return await service.specs.save(body)


@router.get("/specs")
async def list_specs(service: Service, page: Paging) -> Page[NamedSpec]:
    """Every saved spec, by name, with its current version."""
    items, total = await service.specs.names(limit=page.limit, offset=page.offset)
    return Page(items=items, limit=page.limit, offset=page.offset, total=total)


@router.get("/specs/{ref}")
async def get_spec(ref: PathOwnedRef, service: Service) -> NamedSpec:
    """A saved spec: ``name`` (its current version) or ``name@N``."""
    return await service.specs.get(ref)


@router.get("/specs/{name}/versions")
async def spec_versions(name: PathOwnedRef, service: Service, page: Paging) -> Page[NamedSpec]:
    """Every version of a saved spec, newest first."""
    items, total = await service.specs.versions(name, limit=page.limit, offset=page.offset)
    return Page(items=items, limit=page.limit, offset=page.offset, total=total)


@router.get("/channels")
async def channels(service: Service) -> dict[str, dict[str, Any]]:
    """Every channel this server scores with: its options, value range and whether it
    compares a whole group."""
    return service.describe_channels()


@router.get("/runs/{run_id:path}/groups", deprecated=True)  # run ids may hold "/" (e.g. org/run-7)
async def run_groups(
    page: Paging,
    run_id: PathId,
    service: Service,
    step: Annotated[int | None, Query(ge=0, le=2**31 - 1)] = None,
) -> ScoredGroupPage:
    """Deprecated: ``GET /v1/runs/{run_id}/groups?service=rewards`` replaces it."""
    return await service.list_groups(run_id, step=step, limit=page.limit, offset=page.offset)


async def _wire(pending: Awaitable[Any]) -> dict[str, Any]:
    """The rewards service's own wire form (it leaves unrequested fields out)."""
    result: dict[str, Any] = (await pending).wire()
    return result
