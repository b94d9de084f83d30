"""HTTP routes of the judge service."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse

from plaudit_wire.jobs import JobOut
from plaudit_wire.judge import (
    EvaluationRequest,
    GroupRequest,
    GroupResponse,
    ListwiseRequest,
    ListwiseResponse,
    PairwiseRequest,
    PairwiseResponse,
    ScaleRequest,
    ScaleResponse,
)
from services.core.settings import Scope
from services.core.web.auth import Caller, caller_with, require_scope
from services.core.web.deps import IdempotencyKey, ResourcesDep, replayable, service_of
from services.jobs.deps import accepted
from services.judge.jobs import EVALUATION, check_request
from services.judge.service import JudgeService

router = APIRouter(
    prefix="/v1/judge", tags=["judge"], dependencies=[Depends(require_scope(Scope.reward))]
)


async def _service(request: Request) -> JudgeService:
    service: JudgeService = service_of(request, JudgeService)
    return service


Service = Annotated[JudgeService, Depends(_service)]


@router.post("/pairwise")
async def pairwise(body: PairwiseRequest, service: Service) -> PairwiseResponse:
    """Which of two responses is better, asked in both orders."""
    return await service.pairwise(body)


@router.post("/group", response_model=GroupResponse)
async def group(
    body: GroupRequest, service: Service, resources: ResourcesDep, key: IdempotencyKey = None
) -> JSONResponse:
    """Per-completion rewards for one prompt's G completions from pairwise judgments."""
    return await replayable(resources, key, "judge.group", body, lambda: service.group(body))


@router.post("/scale", response_model=ScaleResponse)
async def scale(
    body: ScaleRequest, service: Service, resources: ResourcesDep, key: IdempotencyKey = None
) -> JSONResponse:
    """A 1..K grade distribution per completion, from the level tokens' probabilities."""
    return await replayable(resources, key, "judge.scale", body, lambda: service.scale(body))


@router.post("/listwise", response_model=ListwiseResponse)
async def listwise(
    body: ListwiseRequest, service: Service, resources: ResourcesDep, key: IdempotencyKey = None
) -> JSONResponse:
    """A 0..10 score per completion from one judge call that sees the whole group."""
    return await replayable(resources, key, "judge.listwise", body, lambda: service.listwise(body))


@router.post("/evaluations", status_code=202, response_model=JobOut)
async def evaluations(
    body: EvaluationRequest,
    request: Request,
    resources: ResourcesDep,
    caller: Annotated[Caller, Depends(caller_with(Scope.reward))],
    key: IdempotencyKey = None,
) -> JSONResponse:
    """Measure this server's judge against MT-Bench human votes, as a job: 202 with the job
    and its Location; the job's result is the JSON report of ``plaudit eval judge``."""
    await check_request(body, caller, resources.settings.data_dir)
    return await accepted(request, caller, EVALUATION, body, idempotency_key=key)
