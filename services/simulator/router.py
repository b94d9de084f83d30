"""HTTP routes of the simulator: thin handlers over SimulatorService.

A turn needs the ``reward`` scope (trainers call it inside rollouts); an episode calls a URL
the caller gives and calibrating uses the server's CPUs for minutes, so both need ``admin``;
the listing takes ``reward`` or ``admin``.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse

from plaudit_wire.jobs import JobOut
from plaudit_wire.names import NAME_PATTERN
from plaudit_wire.simulator import (
    CalibrationPage,
    CalibrationRequest,
    EpisodeRequest,
    EpisodeResponse,
    TurnRequest,
    TurnResponse,
)
from services.core.settings import Scope
from services.core.web.auth import Caller, caller_with, require_scope
from services.core.web.deps import IdempotencyKey, ResourcesDep, service_of
from services.core.web.paging import Paging
from services.jobs.deps import accepted
from services.simulator.jobs import CALIBRATE, check_request
from services.simulator.service import SimulatorService

router = APIRouter(prefix="/v1/simulator", tags=["simulator"])

Name = Annotated[
    str | None,
    Query(pattern=f"^{NAME_PATTERN.pattern}$", max_length=128, description="one name only"),
]
Admin = Annotated[Caller, Depends(caller_with(Scope.admin))]


async def _service(request: Request) -> SimulatorService:
    return service_of(request, SimulatorService)


Service = Annotated[SimulatorService, Depends(_service)]


@router.post("/turn", dependencies=[Depends(require_scope(Scope.reward))])
async def turn(body: TurnRequest, service: Service) -> TurnResponse:
    """The simulated user's next message, whether it ends the conversation, and the user's
    satisfaction with the last assistant turn (1-5, with its distribution)."""
    return await service.turn(body)


@router.post("/episodes", dependencies=[Depends(require_scope(Scope.admin))])
async def episodes(body: EpisodeRequest, service: Service) -> EpisodeResponse:
    """A whole dialogue between the simulator and an OpenAI-compatible policy, with the
    user's satisfaction at every turn and why it ended."""
    return await service.episode(body)


@router.post("/calibrations", status_code=202, response_model=JobOut)
async def calibrate(
    body: CalibrationRequest,
    request: Request,
    resources: ResourcesDep,
    caller: Admin,
    key: IdempotencyKey = None,
) -> JSONResponse:
    """Calibrate the simulator to real dialogues as a job: 202 with the job and its
    Location; the job's result holds the stored version and its realism before and after."""
    await check_request(body, resources.settings)
    return await accepted(request, caller, CALIBRATE, body, idempotency_key=key)


@router.get("/calibrations", dependencies=[Depends(require_scope(Scope.reward, Scope.admin))])
async def calibrations(service: Service, page: Paging, name: Name = None) -> CalibrationPage:
    """Stored calibrations, newest first, with their realism figures."""
    return await service.calibrations(name, limit=page.limit, offset=page.offset)
