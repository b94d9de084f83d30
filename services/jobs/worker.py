"""``plaudit worker``: runs the jobs queued on Redis, with the collaborators a server builds.

The worker builds the same components as a server (from the same settings), so the judge
an evaluation job measures is the judge the server is configured to serve.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from services.core.jobs.queues import make_worker
from services.core.jobs.runner import JobRunner
from services.core.metrics import Metrics
from services.core.resources import open_resources
from services.core.settings import Settings
from services.jobs.registry import build_job_services, job_components

log = logging.getLogger(__name__)


async def run_worker(settings: Settings, *, burst: bool = False) -> None:
    """Run queued jobs until stopped (SIGINT/SIGTERM), or until the queue is empty (burst)."""
    if not settings.redis_url:
        raise ValueError("a worker needs PLAUDIT_REDIS_URL")
    needs_embedder = any(c.needs_embedder for c in job_components())
    resources = await open_resources(settings, Metrics(), needs_embedder=needs_embedder)
    registry = build_job_services(resources)
    resources.start_loading()
    runner = JobRunner(resources.jobs.store, registry, settings.jobs, role="worker")
    runner.start()
    worker = make_worker(
        runner, settings.redis_url, settings.jobs, burst=burst, handle_signals=True
    )
    log.info("worker %s runs: %s", runner.worker, ", ".join(sorted(registry.functions)))
    try:
        with contextlib.suppress(asyncio.CancelledError):
            await worker.async_run()
    finally:
        with contextlib.suppress(asyncio.CancelledError):
            await worker.close()
        await runner.close()
        await resources.aclose()
