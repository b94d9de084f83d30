"""``plaudit worker``: runs the jobs queued on Redis, with the collaborators a server builds.

The worker builds the same components as a server (from the same settings), so the judge
an evaluation job measures is the judge the server is configured to serve. It rides out a
Redis outage (issue 23, finding 3): arq's loop stops at the first ``ConnectionError``, so the
worker waits (with backoff, logging each wait) and runs the loop again; jobs running at the
time keep running, since their records and leases live in the database.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from arq.worker import Worker
from redis.backoff import AbstractBackoff, EqualJitterBackoff
from redis.exceptions import RedisError

from services.core.components import Component
from services.core.jobs.queues import make_worker
from services.core.jobs.runner import JobRunner
from services.core.jobs.settings import JobsSettings
from services.core.metrics import Metrics
from services.core.resources import open_resources
from services.core.settings import CoreSettings

log = logging.getLogger(__name__)


async def run_worker(settings: CoreSettings, *, burst: bool = False) -> None:
    """Run queued jobs until stopped (SIGINT/SIGTERM), or until the queue is empty (burst)."""
    if not settings.redis_url:
        raise ValueError("a worker needs PLAUDIT_REDIS_URL")
    built = job_components()
    needs_embedder = any(c.needs_embedder for c in built)
    resources = await open_resources(settings, Metrics(), needs_embedder=needs_embedder)
    for component in built:
        resources.services.build(component, resources)
    registry = resources.job_registry
    await resources.jobs.start()
    resources.start_loading()
    runner = JobRunner(resources.jobs.store, registry, settings.jobs, role="worker")
    runner.start()
    worker = make_worker(
        runner, settings.redis_url, settings.jobs, burst=burst, handle_signals=True
    )
    log.info("worker %s runs: %s", runner.worker, ", ".join(sorted(registry.functions)))
    try:
        await ride_out_outages(worker, settings.jobs)
    finally:
        with contextlib.suppress(asyncio.CancelledError, RedisError, OSError):
            await worker.close()
        await resources.jobs.close()  # no more sweeps: this process's lease is about to lapse
        await runner.close()
        await resources.aclose()


def job_components() -> list[Component]:
    """The components of this build (``services/app.py``) that run jobs: what a worker builds,
    so that the judge an evaluation job measures is the one a server would serve."""
    from services.app import components  # the one list of services (issue 20)

    return [component for component in components() if component.jobs]


async def ride_out_outages(worker: Worker, settings: JobsSettings) -> None:
    """Run arq's loop until it ends or a signal stops it; while Redis is unreachable, wait
    with backoff (``redis_retry_min_s`` doubling up to ``redis_retry_max_s``) and resume.

    The same :class:`~arq.worker.Worker` resumes: its running jobs, their count against
    ``max_jobs`` and its connection pool (which reconnects by itself) carry over.
    """
    stopped = asyncio.Event()
    worker.on_stop = lambda signum: stopped.set()
    # Equal jitter: at least half the doubled wait, so a fleet of workers does not reconnect
    # in step, and never a near-zero wait that would spin.
    backoff = EqualJitterBackoff(cap=settings.redis_retry_max_s, base=settings.redis_retry_min_s)
    while True:
        try:
            await worker.async_run()
            return
        except asyncio.CancelledError:  # arq's signal handler cancelled its loop: stopping
            return
        except (RedisError, OSError) as exc:
            log.warning("Redis is unreachable (%s); the worker waits for it", _describe(exc))
        if not await _wait_for_redis(worker, stopped, backoff):
            log.info("the worker stopped while it waited for Redis")
            return


async def _wait_for_redis(worker: Worker, stopped: asyncio.Event, backoff: AbstractBackoff) -> bool:
    """True once Redis answers; False when a signal stopped the worker meanwhile."""
    failures = 0
    while True:
        failures += 1
        wait = backoff.compute(failures)
        log.warning("waiting %.1f s for Redis (wait %d)", wait, failures)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stopped.wait(), timeout=wait)
        if stopped.is_set():
            return False
        if await _answers(worker):
            log.info("Redis answers again after %d waits; the worker resumes", failures)
            return True


async def _answers(worker: Worker) -> bool:
    if worker._pool is None:  # arq never connected: its loop's create_pool will try
        return True
    try:
        await worker.pool.ping()
    except (RedisError, OSError):
        return False
    return True


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
