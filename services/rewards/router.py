"""HTTP routes of the composite rewards service: thin handlers over RewardsService."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse

from services.core.auth import require_scope
from services.core.deps import IdempotencyKey, ResourcesDep, replayable, service_of
from services.core.schemas import ScoredGroupPage
from services.core.settings import Scope
from services.rewards.schemas import (
    RewardsGroupRequest,
    RewardsGroupResponse,
    ValidateRequest,
    ValidateResponse,
)
from services.rewards.service import RewardsService

router = APIRouter(
    prefix="/v1/rewards", tags=["rewards"], dependencies=[Depends(require_scope(Scope.reward))]
)


def _service(request: Request) -> RewardsService:
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


@router.get("/channels")
async def channels(service: Service) -> dict[str, dict[str, Any]]:
    """Every channel this server scores with: its options, value range and whether it
    compares a whole group."""
    return service.describe_channels()


@router.get("/runs/{run_id:path}/groups", deprecated=True)  # run ids may hold "/" (e.g. org/run-7)
async def run_groups(
    run_id: str,
    service: Service,
    step: Annotated[int | None, Query(ge=0)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> ScoredGroupPage:
    """Deprecated: ``GET /v1/runs/{run_id}/groups?service=rewards`` replaces it."""
    return await service.list_groups(run_id, step=step, limit=limit, offset=offset)


async def _wire(pending: Awaitable[Any]) -> dict[str, Any]:
    """The rewards service's own wire form (it leaves unrequested fields out)."""
    result: dict[str, Any] = (await pending).wire()
    return result
