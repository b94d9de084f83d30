"""Synthesis as a job (``rubrics.synthesize``), with progress by stage.

``POST /v1/rubrics/synthesize`` checks the request at once (422s) and queues the job; the job
runs :meth:`SynthesisService.run` as the caller (its rubrics and instances are the caller's)
and answers a :class:`~plaudit_wire.synthesis.SynthesisResult`. A retry after the
process died resumes from the job's checkpoint: the instances stored so far are kept.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from plaudit_wire.synthesis import SynthesizeRequest
from services.core.context import Principal, principal_var
from services.core.jobs.context import JobContext, JobFunction, JobRegistry
from services.rubrics.synthesis.service import SynthesisService

SYNTHESIZE = "rubrics.synthesize"


def synthesize_job(service: SynthesisService, loaded: Callable[[], Awaitable[None]]) -> JobFunction:
    async def run(ctx: JobContext, params: dict[str, Any]) -> dict[str, Any]:
        request = SynthesizeRequest.model_validate(params)
        principal_var.set(Principal(owner=ctx.owner, admin=False))
        await ctx.progress(0, None, "waiting for the models to load")
        await loaded()

        async def progress(done: int, total: int, stage: str) -> None:
            await ctx.progress(done, total, stage)

        # Each batch's records are stored as they become final, and the checkpoint says
        # which: a retry keeps them and carries on (issue 23).
        result = await service.run(
            request, ctx.job_id, progress, ctx.checkpoint, ctx.save_checkpoint
        )
        return result.model_dump(mode="json")

    return run


def register(
    registry: JobRegistry, service: SynthesisService, loaded: Callable[[], Awaitable[None]]
) -> None:
    registry.register(SYNTHESIZE, synthesize_job(service, loaded))
