"""HTTP routes of the trainer protocols: thin handlers over ProtocolService.

The paths are the trainers', not Plaudit's versioned API: ``POST /get_reward`` is where
OpenRLHF's stock reward server answers, ``POST /slime/reward`` is what slime's ``--rm-url``
points at. Options come as query parameters, since a trainer only lets one set the URL.
"""

from __future__ import annotations

import base64
import binascii
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request

from plaudit_wire.protocols import (
    FailurePolicy,
    OpenRLHFRequest,
    OpenRLHFResponse,
    SlimeRequest,
    SlimeResponse,
)
from plaudit_wire.schemas import ID_PATTERN, INT32_MAX
from services.core.errors import Unauthorized
from services.core.settings import CoreSettings, Scope
from services.core.web.auth import authorize, require_scope, scopes_for
from services.core.web.deps import service_of
from services.protocols.service import ProtocolOptions, ProtocolService

_reward_scope = require_scope(Scope.reward)


async def require_trainer_key(request: Request) -> None:
    """The ``reward`` scope, with the key also accepted as HTTP Basic credentials.

    OpenRLHF and slime send no headers of their own, but their HTTP clients turn credentials
    in the URL into Basic auth: ``http://plaudit:KEY@host:8000/get_reward`` (or ``KEY@host``).
    """
    settings: CoreSettings = request.app.state.settings
    key = _basic_key(request)
    if key is None:
        await _reward_scope(request)
        return
    if settings.api_keys and scopes_for(settings, key) is None:
        raise Unauthorized("unknown API key in the URL's credentials")
    authorize(settings, key, (Scope.reward,))


def _basic_key(request: Request) -> str | None:
    auth = request.headers.get("authorization", "")
    if not auth.lower().startswith("basic "):
        return None
    try:
        decoded = base64.b64decode(auth[6:].strip(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        raise Unauthorized("malformed Basic credentials") from None
    user, _, password = decoded.partition(":")
    return password or user


router = APIRouter(tags=["trainer protocols"], dependencies=[Depends(require_trainer_key)])


async def _service(request: Request) -> ProtocolService:
    service: ProtocolService = service_of(request, ProtocolService)
    return service


Service = Annotated[ProtocolService, Depends(_service)]


async def _options(
    service: Service,
    spec: Annotated[
        str | None,
        Query(max_length=100_000, description="reward spec as JSON (default: the server's)"),
    ] = None,
    group_size: Annotated[
        int | None, Query(ge=1, le=1024, description="samples per prompt the trainer draws")
    ] = None,
    wait_s: Annotated[
        float | None, Query(gt=0, le=600, description="longest wait for a partial group")
    ] = None,
    on_failure: Annotated[
        FailurePolicy | None, Query(description="neutral: group mean, flagged; error: 503")
    ] = None,
    run_id: Annotated[
        str | None,
        Query(min_length=1, max_length=200, pattern=ID_PATTERN, description="store groups"),
    ] = None,
    step: Annotated[int | None, Query(ge=0, le=INT32_MAX)] = None,
    eval_group_size: Annotated[
        int | None,
        Query(
            ge=1,
            le=1024,
            description="samples per prompt of the trainer's evaluation: such a group is "
            "scored once no sample joined it for settle_s",
        ),
    ] = None,
    settle_s: Annotated[
        float | None,
        Query(gt=0, le=600, description="how long an evaluation-sized group waits for more"),
    ] = None,
) -> ProtocolOptions:
    return service.options(
        spec=spec,
        group_size=group_size,
        wait_s=wait_s,
        on_failure=on_failure,
        run_id=run_id,
        step=step,
        eval_group_size=eval_group_size,
        settle_s=settle_s,
    )


Options = Annotated[ProtocolOptions, Depends(_options)]


@router.post("/get_reward")
async def openrlhf_reward(
    body: OpenRLHFRequest, service: Service, options: Options
) -> OpenRLHFResponse:
    """OpenRLHF's remote reward model (``--remote_rm_url``): rewards, scores, extra_logs."""
    return await service.openrlhf(body, options)


@router.post("/slime/reward")
async def slime_reward(body: SlimeRequest, service: Service, options: Options) -> SlimeResponse:
    """slime's remote reward model (``--rm-type remote_rm --reward-key reward``)."""
    return await service.slime(body, options)
