"""What routes use to reach jobs: the caller, the jobs service, and :func:`accepted`, the one
way any service answers a request that starts long work (202, the job, a Location header)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from services.core.settings import Scope
from services.core.web.auth import Caller, caller_with
from services.core.web.deps import get_resources, service_of
from services.core.web.idempotency import ReplayKey
from services.jobs.service import JobsService, job_out

#: Any key that may start work (reward) or oversee it (admin).
JobCaller = Annotated[Caller, Depends(caller_with(Scope.reward, Scope.admin))]


async def _jobs(request: Request) -> JobsService:
    return service_of(request, JobsService)


JobsDep = Annotated[JobsService, Depends(_jobs)]


async def accepted(
    request: Request,
    caller: Caller,
    kind: str,
    params: BaseModel,
    *,
    idempotency_key: ReplayKey | None = None,
) -> JSONResponse:
    """Start job ``kind`` with ``params`` for ``caller``: 202, the job, and its Location.

    A retry with the same ``Idempotency-Key`` and body gets the same job, not a second one.

    ::

        @router.post("/evaluations", status_code=202, response_model=JobOut)
        async def evaluate(body: EvaluationRequest, request: Request, caller: JobCaller):
            return await accepted(request, caller, EVALUATION, body)
    """
    resources = get_resources(request)
    payload = params.model_dump(mode="json")

    async def submit() -> dict[str, str]:
        job = await resources.jobs.submit(kind, payload, owner=caller.owner)
        return {"job_id": job.id}

    started = await resources.idempotency.run(idempotency_key, f"job:{kind}", payload, submit)
    job = await resources.jobs.store.get(started["job_id"])
    if job is None:  # pragma: no cover - expired between the replay and the read
        raise RuntimeError("the job vanished")
    body = job_out(job, full=False).model_dump(mode="json")
    return JSONResponse(body, status_code=202, headers={"Location": f"/v1/jobs/{job.id}"})
