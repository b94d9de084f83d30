"""HTTP routes of the KARMA service: thin handlers over KarmaService.

Scoring needs the ``reward`` scope; the models listing takes ``reward`` or ``admin``; training
(it reads files on the server and uses its CPUs for minutes) and promotion need ``admin``.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import JSONResponse

from plaudit_wire.jobs import JobOut
from plaudit_wire.karma import (
    KarmaModelPage,
    PromoteRequest,
    PromoteResponse,
    ScoreRequest,
    ScoreResponse,
    TrainRequest,
)
from plaudit_wire.names import NAME_PATTERN
from services.core.settings import Scope
from services.core.web.auth import Caller, caller_with, require_scope
from services.core.web.deps import IdempotencyKey, ResourcesDep, replayable, service_of
from services.core.web.paging import Paging
from services.jobs.deps import accepted
from services.karma.jobs import TRAIN, check_request
from services.karma.service import KarmaService

router = APIRouter(prefix="/v1/karma", tags=["karma"])

ModelName = Annotated[
    str | None,
    Query(pattern=f"^{NAME_PATTERN.pattern}$", max_length=128, description="default: karma"),
]
Version = Annotated[int, Path(ge=1, le=10**9, description="a version number")]
Admin = Annotated[Caller, Depends(caller_with(Scope.admin))]


async def _service(request: Request) -> KarmaService:
    return service_of(request, KarmaService)


Service = Annotated[KarmaService, Depends(_service)]


@router.post(
    "/score", response_model=ScoreResponse, dependencies=[Depends(require_scope(Scope.reward))]
)
async def score(
    body: ScoreRequest, service: Service, resources: ResourcesDep, key: IdempotencyKey = None
) -> JSONResponse:
    """One score per reply from the serving KARMA model, and the version that scored.

    503 (``model_not_trained``) when no model has been trained yet."""
    return await replayable(resources, key, "karma.score", body, lambda: service.score(body))


@router.get("/models", dependencies=[Depends(require_scope(Scope.reward, Scope.admin))])
async def models(
    page: Paging,
    service: Service,
    name: ModelName = None,
) -> KarmaModelPage:
    """The trained versions (newest first) with their metrics, and which one serves."""
    return await service.models(name, limit=page.limit, offset=page.offset)


@router.post("/models/{version}/promote")
async def promote(
    version: Version,
    service: Service,
    caller: Admin,
    name: ModelName = None,
    body: PromoteRequest | None = None,
) -> PromoteResponse:
    """Serve this version (recorded in the artifact's history; promote an older one to go
    back)."""
    return await service.promote(name, version, body or PromoteRequest(), caller.owner)


@router.post("/train", status_code=202, response_model=JobOut)
async def train(
    body: TrainRequest,
    request: Request,
    resources: ResourcesDep,
    caller: Admin,
    key: IdempotencyKey = None,
) -> JSONResponse:
    """Train a KARMA model as a job: 202 with the job and its Location. The job's result holds
    the evaluation with its baselines and the stored version; the first version of a name
    serves at once."""
    await check_request(body, resources.settings)
    return await accepted(request, caller, TRAIN, body, idempotency_key=key)
