"""Long work as jobs: arq on Redis when configured, an in-process runner in the embedded default.

Job functions are plain ``async def f(ctx, **kwargs)`` registered by name in a
:class:`JobRegistry`; both queues run the same functions, so a job behaves the same in a laptop
process and in a ``plaudit worker`` container.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from arq import ArqRedis, create_pool
from arq.connections import RedisSettings
from arq.jobs import Job, JobStatus
from arq.worker import Worker, func

log = logging.getLogger(__name__)

JobFunction = Callable[..., Awaitable[Any]]
JobState = Literal["queued", "running", "complete", "failed", "not_found"]


@dataclass
class JobInfo:
    id: str
    state: JobState
    result: Any = None
    error: str | None = None


@dataclass
class JobRegistry:
    """Named job functions, shared by every queue and by the worker."""

    functions: dict[str, JobFunction] = field(default_factory=dict)

    def register(self, name: str, function: JobFunction) -> None:
        if name in self.functions:
            raise ValueError(f"job {name!r} is already registered")
        self.functions[name] = function

    def get(self, name: str) -> JobFunction:
        try:
            return self.functions[name]
        except KeyError:
            raise KeyError(f"unknown job {name!r}") from None


class JobQueue(Protocol):
    async def enqueue(self, name: str, **kwargs: Any) -> str: ...

    async def info(self, job_id: str) -> JobInfo: ...

    async def wait(self, job_id: str, timeout: float) -> JobInfo: ...

    async def close(self) -> None: ...


class InProcessJobQueue:
    """Runs jobs as asyncio tasks in this process, a few at a time."""

    def __init__(self, registry: JobRegistry, concurrency: int = 2) -> None:
        self._registry = registry
        self._limit = asyncio.Semaphore(concurrency)
        self._jobs: dict[str, JobInfo] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}

    async def enqueue(self, name: str, **kwargs: Any) -> str:
        function = self._registry.get(name)
        job_id = uuid.uuid4().hex
        self._jobs[job_id] = JobInfo(job_id, "queued")
        self._tasks[job_id] = asyncio.create_task(self._run(job_id, function, kwargs))
        return job_id

    async def _run(self, job_id: str, function: JobFunction, kwargs: dict[str, Any]) -> None:
        async with self._limit:
            self._jobs[job_id].state = "running"
            try:
                result = await function({"job_id": job_id}, **kwargs)
            except Exception as exc:
                log.exception("job %s failed", job_id)
                self._jobs[job_id] = JobInfo(job_id, "failed", error=repr(exc))
            else:
                self._jobs[job_id] = JobInfo(job_id, "complete", result=result)

    async def info(self, job_id: str) -> JobInfo:
        return self._jobs.get(job_id, JobInfo(job_id, "not_found"))

    async def wait(self, job_id: str, timeout: float) -> JobInfo:
        task = self._tasks.get(job_id)
        if task is not None:
            await asyncio.wait_for(asyncio.shield(task), timeout)
        return await self.info(job_id)

    async def close(self) -> None:
        for task in self._tasks.values():
            task.cancel()
        await asyncio.gather(*self._tasks.values(), return_exceptions=True)


_ARQ_STATES: dict[JobStatus, JobState] = {
    JobStatus.deferred: "queued",
    JobStatus.queued: "queued",
    JobStatus.in_progress: "running",
    JobStatus.complete: "complete",
    JobStatus.not_found: "not_found",
}


class ArqJobQueue:
    """Enqueues onto arq; a ``plaudit worker`` process (or :func:`make_worker`) runs the jobs."""

    def __init__(self, pool: ArqRedis, queue_name: str = "plaudit:jobs") -> None:
        self._pool = pool
        self._queue_name = queue_name

    @classmethod
    async def connect(cls, redis_url: str, queue_name: str = "plaudit:jobs") -> ArqJobQueue:
        pool = await create_pool(RedisSettings.from_dsn(redis_url), default_queue_name=queue_name)
        return cls(pool, queue_name)

    async def enqueue(self, name: str, **kwargs: Any) -> str:
        job = await self._pool.enqueue_job(name, _queue_name=self._queue_name, **kwargs)
        if job is None:  # pragma: no cover - only with a duplicate explicit job id
            raise RuntimeError("arq refused the job")
        return job.job_id

    async def info(self, job_id: str) -> JobInfo:
        job = Job(job_id, self._pool, _queue_name=self._queue_name)
        state = _ARQ_STATES[await job.status()]
        if state != "complete":
            return JobInfo(job_id, state)
        outcome = await job.result_info()
        if outcome is None:  # pragma: no cover - result expired
            return JobInfo(job_id, "not_found")
        if outcome.success:
            return JobInfo(job_id, "complete", result=outcome.result)
        return JobInfo(job_id, "failed", error=repr(outcome.result))

    async def wait(self, job_id: str, timeout: float) -> JobInfo:
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            info = await self.info(job_id)
            if info.state in ("complete", "failed"):
                return info
            if asyncio.get_running_loop().time() > deadline:
                raise TimeoutError(f"job {job_id} still {info.state}")
            await asyncio.sleep(0.05)

    async def close(self) -> None:
        await self._pool.aclose()


def make_worker(
    registry: JobRegistry,
    redis_url: str,
    *,
    queue_name: str = "plaudit:jobs",
    burst: bool = False,
    max_jobs: int = 4,
) -> Worker:
    """An arq worker running every registered job (``burst`` stops it when the queue is empty)."""

    def adapt(name: str, function: JobFunction) -> Any:
        async def run(ctx: dict[str, Any], **kwargs: Any) -> Any:
            return await function({"job_id": ctx.get("job_id")}, **kwargs)

        return func(run, name=name)

    return Worker(
        functions=[adapt(n, f) for n, f in registry.functions.items()],
        redis_settings=RedisSettings.from_dsn(redis_url),
        queue_name=queue_name,
        burst=burst,
        max_jobs=max_jobs,
        handle_signals=False,
    )


async def make_job_queue(registry: JobRegistry, redis_url: str | None) -> JobQueue:
    """arq on Redis when a URL is configured, else the in-process runner."""
    if redis_url:
        return await ArqJobQueue.connect(redis_url)
    return InProcessJobQueue(registry)
