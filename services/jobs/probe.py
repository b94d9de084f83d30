"""``jobs.probe``: a job that counts steps, to check that a process runs and reports jobs."""

from __future__ import annotations

import asyncio
from typing import Any

from plaudit_wire.jobs import ProbeRequest
from services.core.jobs.context import JobContext

PROBE = "jobs.probe"


async def run_probe(ctx: JobContext, params: dict[str, Any]) -> dict[str, Any]:
    """Sleep ``delay_s`` and report each of ``steps`` steps; fail at ``fail_at`` when asked.

    Each finished step is a checkpoint, so a retry after the process died resumes after the
    last one; the result says where this attempt started (``resumed_from``)."""
    request = ProbeRequest.model_validate(params)
    resumed_from = int(ctx.checkpoint or 0)
    for step in range(resumed_from + 1, request.steps + 1):
        await asyncio.sleep(request.delay_s)
        if step == request.fail_at:
            raise RuntimeError(f"the probe failed at step {step}, as asked")
        await ctx.progress(step, request.steps, "probing")
        await ctx.save_checkpoint(step)
    return {
        "steps": request.steps,
        "worker": ctx.worker,
        "attempt": ctx.attempt,
        "resumed_from": resumed_from,
    }
