"""HTTP routes of rubric synthesis: start a job, list its instances, export them."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse, Response

from plaudit_wire.jobs import JobOut
from plaudit_wire.schemas import Page
from plaudit_wire.synthesis import (
    ExportFormat,
    InstanceOut,
    InstanceStatus,
    Stage,
    SynthesizeRequest,
)
from services.core.settings import Scope
from services.core.web.auth import Caller, caller_with, require_scope
from services.core.web.deps import IdempotencyKey, service_of
from services.core.web.paging import Paging
from services.jobs.deps import accepted
from services.rubrics.synthesis import export
from services.rubrics.synthesis.jobs import SYNTHESIZE
from services.rubrics.synthesis.service import SynthesisService

router = APIRouter(prefix="/v1/rubrics", tags=["rubrics"])

Read = [Depends(require_scope(Scope.reward, Scope.admin))]
Writer = Annotated[Caller, Depends(caller_with(Scope.reward))]
JobId = Annotated[str, Query(min_length=1, max_length=32, pattern=r"^[A-Za-z0-9_-]+$")]


async def _service(request: Request) -> SynthesisService:
    return service_of(request, SynthesisService)


Service = Annotated[SynthesisService, Depends(_service)]


@router.post("/synthesize", status_code=202, response_model=JobOut)
async def synthesize(
    body: SynthesizeRequest,
    request: Request,
    service: Service,
    caller: Writer,
    key: IdempotencyKey = None,
) -> JSONResponse:
    """Synthesize instances (question, reference answer, rubric) from documents as a job:
    202 with the job and its Location; the result counts each stage."""
    service.check(body)
    return await accepted(request, caller, SYNTHESIZE, body, idempotency_key=key)


@router.get("/instances", dependencies=Read)
async def instances(
    page: Paging,
    service: Service,
    job_id: JobId | None = None,
    status: InstanceStatus | None = None,
    stage: Stage | None = None,
) -> Page[InstanceOut]:
    """Kept instances and rejected candidates (with stage and reason), newest job first."""
    return await service.page(
        job_id=job_id, status=status, stage=stage, limit=page.limit, offset=page.offset
    )


@router.get(
    "/instances/export",
    dependencies=Read,
    response_class=Response,
    responses={
        200: {
            "description": "the dataset file",
            "content": {
                "application/x-ndjson": {"schema": {"type": "string"}},
                "application/vnd.apache.parquet": {
                    "schema": {"type": "string", "format": "binary"}
                },
            },
        }
    },
)
async def export_instances(
    service: Service, job_id: JobId, format: ExportFormat = "trl"
) -> Response:
    """A job's kept instances as a TRL JSONL, a verl parquet or an OpenRLHF JSONL."""
    kept = await service.kept(job_id)
    name = f"{job_id}-{format}.{export.EXTENSIONS[format]}"
    return Response(
        export.render(kept, format),
        media_type=export.MEDIA_TYPES[format],
        headers={"Content-Disposition": f'attachment; filename="{name}"'},
    )
