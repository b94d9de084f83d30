"""HTTP routes of the ordinal service."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse

from plaudit_wire.ordinal import (
    AdvantagesRequest,
    AdvantagesResponse,
    DecomposeRequest,
    DecomposeResponse,
)
from services.core.settings import Scope
from services.core.web.auth import require_scope
from services.core.web.deps import IdempotencyKey, ResourcesDep, replayable, service_of
from services.ordinal.service import OrdinalService

router = APIRouter(
    prefix="/v1/ordinal", tags=["ordinal"], dependencies=[Depends(require_scope(Scope.reward))]
)


async def _service(request: Request) -> OrdinalService:
    service: OrdinalService = service_of(request, OrdinalService)
    return service


Service = Annotated[OrdinalService, Depends(_service)]


@router.post("/advantages", response_model=AdvantagesResponse)
async def advantages(
    body: AdvantagesRequest, service: Service, resources: ResourcesDep, key: IdempotencyKey = None
) -> JSONResponse:
    """Group advantages from discrete judge scores (ODRPO, GRPO, MaxRL, Dr.GRPO)."""
    return await replayable(
        resources, key, "ordinal.advantages", body, lambda: service.advantages(body)
    )


@router.post("/decompose")
async def decompose(body: DecomposeRequest, service: Service) -> DecomposeResponse:
    """Scores to the binary ladder b^k = [score >= k], k = 2..K, for inspection."""
    return service.decompose(body)
