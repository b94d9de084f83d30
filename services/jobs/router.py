"""HTTP routes of the job API."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, StreamingResponse

from plaudit_wire.jobs import JobOut, JobPage, JobState, ProbeRequest, View
from plaudit_wire.names import NO_NUL_PATTERN
from services.core.errors import NotFound
from services.core.web.deps import IdempotencyKey, PathId
from services.core.web.paging import Paging
from services.jobs.deps import JobCaller, JobsDep, accepted
from services.jobs.probe import PROBE

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])


@router.get("")
async def list_jobs(
    page: Paging,
    service: JobsDep,
    caller: JobCaller,
    kind: Annotated[str | None, Query(max_length=100, pattern=NO_NUL_PATTERN)] = None,
    state: JobState | None = None,
) -> JobPage:
    """Jobs, newest first: a reward key's own, or every job for an admin key."""
    return await service.page(caller, kind=kind, state=state, limit=page.limit, offset=page.offset)


# Before the "/{job_id}" routes: Starlette answers a method that no route takes with the Allow
# header of the first route whose path matches, so OPTIONS /v1/jobs/probe said "Allow: GET"
# (issue 23).
@router.post("/probe", status_code=202, response_model=JobOut)
async def probe(
    body: ProbeRequest, request: Request, caller: JobCaller, key: IdempotencyKey = None
) -> JSONResponse:
    """Start ``jobs.probe``, a job that counts steps: checks that workers run jobs."""
    return await accepted(request, caller, PROBE, body, idempotency_key=key)


@router.get("/{job_id}")
async def get_job(
    job_id: PathId, service: JobsDep, caller: JobCaller, view: View = "full"
) -> JobOut:
    """One job; ``view=summary`` leaves out its params and result."""
    return await service.get(caller, job_id, full=view == "full")


@router.post("/{job_id}/cancel")
async def cancel_job(job_id: PathId, service: JobsDep, caller: JobCaller) -> JobOut:
    """Cancel a queued job, or stop a running one (409 when it already finished)."""
    return await service.cancel(caller, job_id)


@router.get(
    "/{job_id}/events",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}}},
)
async def job_events(job_id: PathId, service: JobsDep, caller: JobCaller) -> StreamingResponse:
    """Server-sent events: ``progress`` each time the job changes, ``finished`` at the end
    (with the result), then the stream closes."""
    updates = service.follow(caller, job_id)
    first = await anext(updates, None)  # raises the 404 before the stream starts
    if first is None:
        raise NotFound(f"no job {job_id!r}", param="job_id")
    return StreamingResponse(
        _frames(first, updates),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


async def _frames(first: JobOut, rest: AsyncIterator[JobOut | None]) -> AsyncIterator[str]:
    yield _frame(first)
    async for job in rest:
        yield ": keep-alive\n\n" if job is None else _frame(job)


def _frame(job: JobOut) -> str:
    event = "finished" if job.finished_at is not None else "progress"
    return f"event: {event}\ndata: {json.dumps(job.model_dump(mode='json'))}\n\n"
