"""HTTP routes of the diversity service."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse

from plaudit_wire.diversity import (
    DiversityBatchRequest,
    DiversityBatchResponse,
    DiversityRequest,
    DiversityResponse,
)
from services.core.settings import Scope
from services.core.web.auth import require_scope
from services.core.web.deps import IdempotencyKey, ResourcesDep, replayable, service_of
from services.diversity.service import DiversityService

router = APIRouter(
    prefix="/v1/diversity", tags=["diversity"], dependencies=[Depends(require_scope(Scope.reward))]
)


async def _service(request: Request) -> DiversityService:
    service: DiversityService = service_of(request, DiversityService)
    return service


Service = Annotated[DiversityService, Depends(_service)]


@router.post("/group", response_model=DiversityResponse)
async def group(
    body: DiversityRequest, service: Service, resources: ResourcesDep, key: IdempotencyKey = None
) -> JSONResponse:
    """Diversity reward per completion of one group, and the group's statistics."""
    return await replayable(
        resources, key, "diversity.group", body, lambda: service.score_group(body)
    )


@router.post("/groups", response_model=DiversityBatchResponse)
async def groups(
    body: DiversityBatchRequest,
    service: Service,
    resources: ResourcesDep,
    key: IdempotencyKey = None,
) -> JSONResponse:
    """Several groups in one request, each scored within itself."""
    return await replayable(
        resources, key, "diversity.groups", body, lambda: service.score_groups(body)
    )
