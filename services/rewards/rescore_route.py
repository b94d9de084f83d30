"""``POST /v1/runs/{run_id}/rescore``: the rewards service's job, under the runs it rescores.

It lives with the rewards service (which owns the spec it checks and the job it starts), so
the runs listing depends on nothing but core (issue 20: rewards and runs imported each other).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse

from plaudit_wire.jobs import JobOut
from services.core.db.records import ScoredGroupRepository
from services.core.errors import NotFound
from services.core.settings import Scope
from services.core.web.auth import Caller, caller_with, require_scope
from services.core.web.deps import IdempotencyKey, PathId, get_resources, service_of
from services.jobs.deps import accepted
from services.rewards.rescore import RESCORE, RescoreParams, RescoreRequest
from services.rewards.service import RewardsService

router = APIRouter(
    prefix="/v1/runs",
    tags=["runs"],
    dependencies=[Depends(require_scope(Scope.reward, Scope.admin))],
)


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
    rewards = service_of(request, RewardsService)
    await rewards.check_spec(body.spec)
    await _require_groups(get_resources(request).scored_groups, run_id, body.step)
    params = RescoreParams(**body.model_dump(), run_id=run_id, admin=caller.admin)
    return await accepted(request, caller, RESCORE, params, idempotency_key=key)


async def _require_groups(groups: ScoredGroupRepository, run_id: str, step: int | None) -> None:
    """404 when the run has no stored reward groups the caller may see (issue 21: an unknown
    run was accepted and the job then 'succeeded' with 0 groups)."""
    if await _reward_groups(groups, run_id, None) == 0:
        raise NotFound(f"no stored reward groups for run {run_id!r}", param="run_id")
    if step is not None and await _reward_groups(groups, run_id, step) == 0:
        raise NotFound(f"run {run_id!r} has no stored reward groups at step {step}", param="step")


async def _reward_groups(groups: ScoredGroupRepository, run_id: str, step: int | None) -> int:
    _, total = await groups.list_for_run(run_id, step=step, service="rewards", limit=1)
    return total
