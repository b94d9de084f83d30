"""HTTP routes of the evaluation memory: the admin API (admin scope) and the ingest route
for trainers that score elsewhere (reward or admin scope). Thin handlers over MemoryService."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import JSONResponse

from plaudit_wire.memory import (
    IngestOut,
    IngestRequest,
    IngestStatus,
    PauseOut,
    RecordKind,
    RecordOut,
    RevisionOut,
    RollbackBody,
    RollbackOut,
    RunDetail,
    RunItem,
    SearchRequest,
    SearchResponse,
    StepDetail,
    StepOut,
)
from plaudit_wire.schemas import INT32_MAX, Page
from services.core.settings import Scope
from services.core.web.auth import require_scope
from services.core.web.deps import IdempotencyKey, PathId, QueryId, ResourcesDep, service_of
from services.core.web.paging import Paging
from services.memory.repository import RecordFilter
from services.memory.service import MemoryService

router = APIRouter(prefix="/v1/memory", tags=["memory"])

Admin = [Depends(require_scope(Scope.admin))]
Trainer = [Depends(require_scope(Scope.reward, Scope.admin))]
Step = Annotated[int, Path(ge=0, le=INT32_MAX)]
RubricId = Annotated[str, Path(pattern=r"^rb_[0-9a-f]{1,40}$", max_length=43)]
RevisionId = Annotated[str, Path(pattern=r"^rv_[0-9a-f]{1,40}$", max_length=43)]
RubricFilter = Annotated[str | None, Query(pattern=r"^rb_[0-9a-f]{1,40}$", max_length=43)]


async def _service(request: Request) -> MemoryService:
    return service_of(request, MemoryService)


Service = Annotated[MemoryService, Depends(_service)]


@router.get("/ingest", dependencies=Admin)
async def ingest_status(service: Service) -> IngestStatus:
    """This process's ingest queue: accepted, retried and dropped groups, with the reasons."""
    return service.ingest_status()


@router.get("/runs", dependencies=Admin)
async def runs(service: Service, page: Paging) -> Page[RunItem]:
    """Every run the memory holds (one item per run and rubric), most recent first."""
    return await service.runs(limit=page.limit, offset=page.offset)


@router.get("/runs/{run_id}", dependencies=Admin)
async def run(run_id: PathId, service: Service, rubric_id: RubricFilter = None) -> RunDetail:
    """A run: its state, reward and pass-rate curve, and the current criteria."""
    return await service.run(run_id, rubric_id)


@router.get("/runs/{run_id}/steps", dependencies=Admin)
async def steps(run_id: PathId, service: Service, page: Paging) -> Page[StepOut]:
    """The run's step summaries, newest first."""
    return await service.steps(run_id, limit=page.limit, offset=page.offset)


@router.get("/runs/{run_id}/steps/{step}", dependencies=Admin)
async def step(run_id: PathId, step: Step, service: Service) -> StepDetail:
    """One step's summary and its rollout analyses."""
    return await service.step(run_id, step)


@router.post(
    "/runs/{run_id}/steps/{step}",
    status_code=202,
    dependencies=Trainer,
    response_model=IngestOut,
)
async def ingest(
    run_id: PathId,
    step: Step,
    body: IngestRequest,
    service: Service,
    resources: ResourcesDep,
    key: IdempotencyKey = None,
) -> JSONResponse:
    """Groups a trainer scored elsewhere, queued for the memory (``dropped``: queue full).

    With an Idempotency-Key, a retry (or 20 concurrent ones) queues the groups once and gets
    the first answer back, so a trainer's retry never counts a group twice."""

    async def queue() -> dict[str, Any]:
        return (await service.ingest(run_id, step, body)).model_dump()

    payload = {"run_id": run_id, "step": step, **body.model_dump()}
    answer = await resources.idempotency.run(key, "memory.ingest", payload, queue)
    return JSONResponse(answer, status_code=202)


@router.get("/records", dependencies=Admin)
async def records(
    page: Paging,
    service: Service,
    run_id: QueryId = None,
    kind: Annotated[RecordKind | None, Query()] = None,
    step: Annotated[int | None, Query(ge=0, le=INT32_MAX)] = None,
    rubric_id: RubricFilter = None,
) -> Page[RecordOut]:
    """Memory records filtered by run, kind, step and rubric, newest step first."""
    where = RecordFilter(run_id=run_id, rubric_id=rubric_id, kind=kind, step=step)
    return await service.records(where, limit=page.limit, offset=page.offset)


@router.post("/search", dependencies=Admin)
async def search(body: SearchRequest, service: Service) -> SearchResponse:
    """Static and dynamic retrieval for a text, as the editor sees history."""
    return await service.search(body)


@router.get("/runs/{run_id}/revisions", dependencies=Admin)
async def revisions(run_id: PathId, service: Service, page: Paging) -> Page[RevisionOut]:
    """The run's revisions and their states, newest first."""
    return await service.revisions(run_id, limit=page.limit, offset=page.offset)


@router.post("/revisions/{revision_id}/approve", dependencies=Admin)
async def approve(revision_id: RevisionId, service: Service) -> RevisionOut:
    """Apply a held revision as the revision job would have (a new rubric version and its
    ``rubric_update`` record); the revision becomes ``applied``, with who approved it in
    ``detail.approved``. 409 when it is not held, or when the rubric has moved on from the
    version it was proposed on (nothing is applied)."""
    return await service.approve(revision_id)


@router.post("/revisions/{revision_id}/dismiss", dependencies=Admin)
async def dismiss(revision_id: RevisionId, service: Service) -> RevisionOut:
    """A held revision becomes ``rejected`` (nothing applied), with who dismissed it in
    ``reason`` and ``detail.dismissed``. 409 when it is not held."""
    return await service.dismiss(revision_id)


@router.post("/runs/{run_id}/pause", dependencies=Admin)
async def pause(run_id: PathId, service: Service) -> PauseOut:
    """No new revisions for this run (scoring goes on with the current version)."""
    return await service.set_paused(run_id, True)


@router.post("/runs/{run_id}/resume", dependencies=Admin)
async def resume(run_id: PathId, service: Service) -> PauseOut:
    """Revisions start again for this run."""
    return await service.set_paused(run_id, False)


@router.post("/rubrics/{rubric_id}/rollback", dependencies=Admin)
async def rollback(rubric_id: RubricId, body: RollbackBody, service: Service) -> RollbackOut:
    """The rubric's current pointer moved back, recorded in the memory."""
    return await service.rollback(rubric_id, body)
