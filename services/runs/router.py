"""HTTP routes of the runs listing: thin handlers over RunsService."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse

from services.core.auth import Caller, caller_with, require_scope
from services.core.deps import IdempotencyKey, PathId, get_resources, service_of
from services.core.errors import NotFound
from services.core.schemas import ID_PATTERN, Page, ScoredGroupOut
from services.core.settings import Scope
from services.jobs.deps import accepted
from services.jobs.schemas import JobOut
from services.rewards.rescore import RESCORE, RescoreParams, RescoreRequest
from services.rewards.service import RewardsService
from services.runs.schemas import RunSummary
from services.runs.service import RunsService

router = APIRouter(
    prefix="/v1/runs",
    tags=["runs"],
    dependencies=[Depends(require_scope(Scope.reward, Scope.admin))],
)

Limit = Annotated[int, Query(ge=1, le=1000)]
Offset = Annotated[int, Query(ge=0, le=2**31 - 1)]


def _service(request: Request) -> RunsService:
    return service_of(request, RunsService)


Service = Annotated[RunsService, Depends(_service)]


@router.get("")
async def runs(service: Service, limit: Limit = 100, offset: Offset = 0) -> Page[RunSummary]:
    """Every run the key may see (its own; an admin key sees all), most recently active first."""
    return await service.runs(limit=limit, offset=offset)


@router.get("/{run_id:path}/groups")  # run ids may hold "/" (e.g. org/run-7)
async def run_groups(
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
    limit: Limit = 100,
    offset: Offset = 0,
) -> Page[ScoredGroupOut]:
    """The groups stored for ``run_id`` in scoring order, for audits."""
    return await service.groups(run_id, step=step, service=kind, limit=limit, offset=offset)


@router.post("/{run_id:path}/rescore", status_code=202, response_model=JobOut)
async def rescore(
    run_id: PathId,
    body: RescoreRequest,
    request: Request,
    caller: Annotated[Caller, Depends(caller_with(Scope.reward, Scope.admin))],
    key: IdempotencyKey = None,
) -> JSONResponse:
    """Score the run's stored reward groups again with another spec, as a job (202 and its
    Location); the result says how the two scorings agree (rank correlation per group, sign
    agreement of advantages)."""
    rewards = get_resources(request).services.get(RewardsService)
    if rewards is None:
        raise NotFound("this server does not run the rewards service", param="run_id")
    await rewards.check_spec(body.spec)
    await _require_groups(service_of(request, RunsService), run_id, body.step)
    params = RescoreParams(**body.model_dump(), run_id=run_id, admin=caller.admin)
    return await accepted(request, caller, RESCORE, params, idempotency_key=key)


async def _require_groups(runs: RunsService, run_id: str, step: int | None) -> None:
    """404 when the run has no stored reward groups the caller may see (issue 21: an unknown
    run was accepted and the job then 'succeeded' with 0 groups)."""
    if (await runs.groups(run_id, step=None, service="rewards", limit=1, offset=0)).total == 0:
        raise NotFound(f"no stored reward groups for run {run_id!r}", param="run_id")
    if step is not None:
        found = await runs.groups(run_id, step=step, service="rewards", limit=1, offset=0)
        if found.total == 0:
            raise NotFound(
                f"run {run_id!r} has no stored reward groups at step {step}", param="step"
            )
