"""Where jobs run: in this process (the embedded default) or on arq workers through Redis.

Both queues write a ``queued`` record first and hand out that record; the runner that picks
the job up claims it (``queued`` -> ``running``), so a job cancelled while it waited never
starts, and no two processes run a job at once. A job whose process died is queued again
(:mod:`services.core.jobs.sweeper`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any, Protocol

from arq import ArqRedis, create_pool
from arq.connections import RedisSettings
from arq.constants import in_progress_key_prefix, job_key_prefix
from arq.worker import Worker, func
from redis.exceptions import RedisError

from services.core.db.tables import Job
from services.core.errors import BackendUnavailable
from services.core.jobs.context import JobRegistry
from services.core.jobs.runner import JobRunner
from services.core.jobs.settings import JobsSettings
from services.core.jobs.store import JobStore
from services.core.jobs.sweeper import Sweeper

log = logging.getLogger(__name__)

#: The one arq function: it runs whichever job the record names.
ARQ_FUNCTION = "plaudit_job"


class JobQueue(Protocol):
    """Starts jobs and cancels them; records are read through :attr:`store`."""

    @property
    def store(self) -> JobStore: ...

    async def submit(
        self, kind: str, params: Mapping[str, Any], *, owner: str | None = None
    ) -> Job: ...

    async def cancel(self, job_id: str) -> Job | None: ...

    async def start(self) -> None: ...

    async def close(self) -> None: ...


class InProcessJobQueue:
    """Runs jobs as asyncio tasks of this process, ``concurrency`` at a time."""

    def __init__(self, store: JobStore, registry: JobRegistry, settings: JobsSettings) -> None:
        self._registry = registry
        self._runner = JobRunner(store, registry, settings, role="inprocess")
        self._sweeper = Sweeper(store, settings, resume=self._resume)
        self._limit = asyncio.Semaphore(settings.concurrency)
        self._tasks: dict[str, asyncio.Task[None]] = {}

    @property
    def store(self) -> JobStore:
        return self._runner.store

    async def submit(
        self, kind: str, params: Mapping[str, Any], *, owner: str | None = None
    ) -> Job:
        self._registry.get(kind)
        job = await self.store.create(kind, params, owner=owner, worker=self._runner.worker)
        self._spawn(job.id)
        return job

    def _spawn(self, job_id: str) -> None:
        task = asyncio.create_task(self._run(job_id), name=f"job {job_id}")
        self._tasks[job_id] = task
        task.add_done_callback(lambda _: self._tasks.pop(job_id, None))

    async def _resume(self, job: Job, reason: str) -> bool:
        """A dead process's job (this server's predecessor's, or another server's on the
        same database) runs here, from its checkpoint; one of a kind this process does not
        run is left for a process that does."""
        if job.kind not in self._registry:
            return False
        if not await self.store.requeue(job, reason, worker=self._runner.worker):
            return False
        self._spawn(job.id)
        return True

    async def _run(self, job_id: str) -> None:
        async with self._limit:
            try:
                await self._runner.execute(job_id)
            except Exception:
                log.exception("job %s could not be run", job_id)

    async def cancel(self, job_id: str) -> Job | None:
        job = await self.store.request_cancel(job_id)
        if job is not None and not self._runner.cancel_local(job_id):
            waiting = self._tasks.get(job_id)
            if waiting is not None and job.state == "cancelled":
                waiting.cancel()
        return job

    async def start(self) -> None:
        await self._sweeper.start()
        self._runner.start()

    async def close(self) -> None:
        """Stop; running jobs are handed back and, like those still waiting, stay queued
        for the next start (or another server on the same database) to resume."""
        await self._sweeper.close()
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self._runner.close()
        self._runner.retire()  # a later start in this process (tests) resumes them at once


class ArqJobQueue:
    """Queues jobs on Redis for ``plaudit worker`` processes (see :func:`make_worker`)."""

    def __init__(
        self, pool: ArqRedis, store: JobStore, registry: JobRegistry, settings: JobsSettings
    ) -> None:
        self._pool = pool
        self._store = store
        self._registry = registry
        self._settings = settings
        self._sweeper = Sweeper(store, settings, resume=self._resume, lost=self._lost)

    @classmethod
    async def connect(
        cls, redis_url: str, store: JobStore, registry: JobRegistry, settings: JobsSettings
    ) -> ArqJobQueue:
        pool = await create_pool(
            RedisSettings.from_dsn(redis_url), default_queue_name=settings.queue_name
        )
        return cls(pool, store, registry, settings)

    @property
    def store(self) -> JobStore:
        return self._store

    async def submit(
        self, kind: str, params: Mapping[str, Any], *, owner: str | None = None
    ) -> Job:
        self._registry.get(kind)
        job = await self._store.create(kind, params, owner=owner)
        try:
            await self._enqueue(job.id, arq_id(job.id, 0))
        except (RedisError, OSError) as exc:
            # repr: a Redis error can quote bytes with NUL, which Postgres text cannot hold.
            await self._store.fail_abandoned(job, f"could not be queued: {exc!r}")
            raise BackendUnavailable("the job queue (Redis) is unreachable", retry_after=5) from exc
        return job

    async def cancel(self, job_id: str) -> Job | None:
        # A queued job is cancelled in its record (the worker will not claim it); a running one
        # is flagged, and the worker's heartbeat stops it.
        return await self._store.request_cancel(job_id)

    async def start(self) -> None:
        await self._sweeper.start()

    async def close(self) -> None:
        await self._sweeper.close()
        await self._pool.aclose()

    async def _enqueue(self, job_id: str, queued_as: str) -> None:
        await self._pool.enqueue_job(
            ARQ_FUNCTION, job_id, _job_id=queued_as, _queue_name=self._settings.queue_name
        )

    async def _resume(self, job: Job, reason: str) -> bool:
        """Queue a dead worker's job (or one Redis lost) again, under a new arq id: the dead
        worker's in-progress mark would keep the old one from running for hours."""
        if not await self._store.requeue(job, reason, worker=None):
            return False
        if job.attempts > 0:
            old = arq_id(job.id, job.attempts - 1)
            await self._pool.zrem(self._settings.queue_name, old)
            await self._pool.delete(job_key_prefix + old, in_progress_key_prefix + old)
        await self._enqueue(job.id, arq_id(job.id, job.attempts))
        return True

    async def _lost(self, job: Job) -> str | None:
        # The job's definition (or its in-progress mark) is on Redis whatever queue it is on.
        queued_as = arq_id(job.id, job.attempts)
        keys = (job_key_prefix + queued_as, in_progress_key_prefix + queued_as)
        return None if await self._pool.exists(*keys) else "it is no longer on the Redis queue"


def arq_id(job_id: str, attempts: int) -> str:
    """The arq job id of a record that has started ``attempts`` times: each retry is a new
    arq job (issue 23), since arq will not queue an id it still holds."""
    return job_id if attempts == 0 else f"{job_id}.{attempts}"


def make_worker(
    runner: JobRunner,
    redis_url: str,
    settings: JobsSettings,
    *,
    burst: bool = False,
    handle_signals: bool = False,
) -> Worker:
    """An arq worker that runs every queued job through ``runner``.

    arq's own retries and results are off: the record is the result, and a job whose worker
    died is queued again by a sweeper (:mod:`services.core.jobs.sweeper`), under a new arq id.
    """

    async def run(ctx: dict[str, Any], job_id: str) -> None:
        await runner.execute(job_id)

    return Worker(
        functions=[func(run, name=ARQ_FUNCTION)],
        redis_settings=RedisSettings.from_dsn(redis_url),
        queue_name=settings.queue_name,
        burst=burst,
        max_jobs=settings.concurrency,
        # The runner's own timeout fires first and records why.
        job_timeout=settings.timeout_s + 60,
        keep_result=0,
        max_tries=1,
        handle_signals=handle_signals,
    )


async def make_job_queue(
    store: JobStore, registry: JobRegistry, settings: JobsSettings, redis_url: str | None
) -> JobQueue:
    """arq on Redis when a URL is configured, else the in-process runner."""
    if redis_url:
        return await ArqJobQueue.connect(redis_url, store, registry, settings)
    return InProcessJobQueue(store, registry, settings)
