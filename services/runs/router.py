"""HTTP routes of the runs listing: thin handlers over RunsService."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request

from plaudit_wire.runs import RunSummary
from plaudit_wire.schemas import ID_PATTERN, Page, ScoredGroupOut
from services.core.settings import Scope
from services.core.web.auth import require_scope
from services.core.web.deps import PathId, service_of
from services.core.web.paging import Paging
from services.runs.service import RunsService

router = APIRouter(
    prefix="/v1/runs",
    tags=["runs"],
    dependencies=[Depends(require_scope(Scope.reward, Scope.admin))],
)


async def _service(request: Request) -> RunsService:
    return service_of(request, RunsService)


Service = Annotated[RunsService, Depends(_service)]


@router.get("")
async def runs(service: Service, page: Paging) -> Page[RunSummary]:
    """Every run the key may see (its own; an admin key sees all), most recently active first."""
    return await service.runs(limit=page.limit, offset=page.offset)


@router.get("/{run_id:path}/groups")  # run ids may hold "/" (e.g. org/run-7)
async def run_groups(
    page: Paging,
    run_id: PathId,
    service: Service,
    step: Annotated[int | None, Query(ge=0, le=2**31 - 1)] = None,
    kind: Annotated[
        str | None,
        Query(
            alias="service",
            max_length=100,
            pattern=ID_PATTERN,
            description="only this service's groups",
        ),
    ] = None,
) -> Page[ScoredGroupOut]:
    """The groups stored for ``run_id`` in scoring order, for audits."""
    return await service.groups(
        run_id, step=step, service=kind, limit=page.limit, offset=page.offset
    )
