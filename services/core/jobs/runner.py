"""Running one job the same way in every process, and holding the lease of the running ones.

A :class:`JobRunner` belongs to one process (a server with the in-process queue, or a
``plaudit worker``). It claims a queued record, runs the function with a timeout, and writes
the outcome; its heartbeat renews the lease of every job it holds and stops the ones someone
cancelled from another process.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import uuid
from dataclasses import dataclass
from typing import Any

from services.core.jobs.context import JobCancelled, JobContext, JobFunction, JobRegistry
from services.core.jobs.settings import JobsSettings
from services.core.jobs.store import FinalState, JobStore

log = logging.getLogger(__name__)

#: The worker ids of this process's runners (see :func:`is_own_worker`).
_OWN_WORKERS: set[str] = set()


def new_worker_id(role: str) -> str:
    """``host:pid:role-token``: where a job runs, readable by the sweeper of any process."""
    worker = f"{socket.gethostname()}:{os.getpid()}:{role}-{uuid.uuid4().hex[:8]}"
    _OWN_WORKERS.add(worker)
    return worker


def is_own_worker(worker: str) -> bool:
    return worker in _OWN_WORKERS


@dataclass
class _Running:
    task: asyncio.Task[Any]
    ctx: JobContext
    hard_cancel_scheduled: bool = False
    finishing: bool = False
    """Set once the outcome is being written: a cancel that arrives then must not interrupt
    the write (the record would stay ``running`` until its lease expired)."""


class JobRunner:
    """Executes jobs for one process and keeps their leases alive."""

    def __init__(
        self, store: JobStore, registry: JobRegistry, settings: JobsSettings, *, role: str
    ) -> None:
        self.worker = new_worker_id(role)
        self._store = store
        self._registry = registry
        self._settings = settings
        self._running: dict[str, _Running] = {}
        self._heartbeat: asyncio.Task[None] | None = None

    @property
    def store(self) -> JobStore:
        return self._store

    def start(self) -> None:
        """Start renewing leases every ``heartbeat_s``."""
        self._heartbeat = asyncio.create_task(self._beat(), name=f"jobs-heartbeat {self.worker}")

    def retire(self) -> None:
        """From now on a sweep in this process treats this runner's jobs as a dead process's
        (and resumes them at once): call once its queue's sweeper is stopped."""
        _OWN_WORKERS.discard(self.worker)

    async def close(self) -> None:
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            await asyncio.gather(self._heartbeat, return_exceptions=True)

    async def execute(self, job_id: str) -> None:
        """Claim and run one queued job; a job no longer queued (cancelled) is skipped."""
        job = await self._store.claim(job_id, self.worker)
        if job is None:
            log.info("job %s is no longer queued; not run", job_id)
            return
        ctx = JobContext(
            job.id,
            job.kind,
            job.owner,
            self.worker,
            self._store,
            attempt=job.attempts,
            checkpoint=job.checkpoint,
        )
        if job.kind not in self._registry:
            await self._finish(ctx, "failed", error=f"this process has no job {job.kind!r}")
            return
        task = asyncio.current_task()
        assert task is not None
        self._running[job.id] = _Running(task, ctx)
        try:
            await self._run(self._registry.get(job.kind), ctx, dict(job.params), task)
        finally:
            self._running.pop(job.id, None)

    def cancel_local(self, job_id: str) -> bool:
        """Stop a job this runner is running now; False when it is not running here.

        The job sees the flag at its next cancellation point (a progress report) and stops
        cleanly; only a job that reaches none within ``cancel_grace_s`` has its task cancelled,
        since a task cancelled in the middle of a database write can leave SQLite locked.
        """
        running = self._running.get(job_id)
        if running is None:
            return False
        running.ctx.cancel_requested = True
        if not running.finishing and not running.hard_cancel_scheduled:
            running.hard_cancel_scheduled = True
            loop = asyncio.get_running_loop()
            loop.call_later(self._settings.cancel_grace_s, self._hard_cancel, job_id, running)
        return True

    def _hard_cancel(self, job_id: str, running: _Running) -> None:
        if self._running.get(job_id) is running and not running.finishing:
            log.info("job %s reached no cancellation point in time; cancelling its task", job_id)
            running.task.cancel()

    async def _run(
        self,
        function: JobFunction,
        ctx: JobContext,
        params: dict[str, Any],
        task: asyncio.Task[Any],
    ) -> None:
        timeout = self._settings.timeout_s
        deadline = asyncio.timeout(timeout)
        try:
            async with deadline:
                result = await function(ctx, params)
            await self._finish(ctx, "succeeded", result=_as_json(result))
        except JobCancelled:
            await self._finish(ctx, "cancelled", error="cancelled while running")
        except asyncio.CancelledError:
            if not ctx.cancel_requested:  # the process is stopping, not a cancel request
                await self._hand_back(ctx)
                raise
            task.uncancel()
            await self._finish(ctx, "cancelled", error="cancelled while running")
        except TimeoutError as exc:
            error = f"timed out after {timeout:g} s" if deadline.expired() else _describe(exc)
            await self._finish(ctx, "failed", error=error)
        except Exception as exc:
            log.exception("job %s (%s) failed", ctx.job_id, ctx.kind)
            await self._finish(ctx, "failed", error=_describe(exc))

    async def _finish(
        self, ctx: JobContext, state: FinalState, *, result: Any = None, error: str | None = None
    ) -> None:
        running = self._running.get(ctx.job_id)
        if running is not None:
            running.finishing = True
        # Shielded: a cancel racing the write (the heartbeat sees the same cancel request that
        # the job's own progress call just raised on) still lets the outcome reach the record.
        write = self._store.finish(ctx.job_id, self.worker, state, result=result, error=error)
        if not await asyncio.shield(write):
            log.warning("job %s was no longer ours to finish (%s)", ctx.job_id, state)

    def _stop_cancelled_and_lost(self, before: set[str], held: dict[str, bool]) -> None:
        """Stop the jobs someone cancelled, and those another process took over after this
        one's lease lapsed (a stalled process): only one process runs a job to its end."""
        for job_id in before:
            running = self._running.get(job_id)
            if running is None or running.finishing:
                continue
            if job_id not in held:
                log.warning("job %s is no longer held by %s; stopping it here", job_id, self.worker)
            if job_id not in held or held[job_id]:
                self.cancel_local(job_id)

    async def _hand_back(self, ctx: JobContext) -> None:
        """The process is stopping: the job goes back to the queue for the next process
        (issue 23: a stopped server's or worker's job is retried, not failed)."""
        running = self._running.get(ctx.job_id)
        if running is not None:
            running.finishing = True
        reason = f"the process running it ({self.worker}) stopped while the job ran"
        write = self._store.interrupt(ctx.job_id, self.worker, reason)
        if await asyncio.shield(write):
            log.info("job %s handed back for a retry: this process is stopping", ctx.job_id)

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(self._settings.heartbeat_s)
            try:
                before = set(self._running)  # claimed before the renewal reads the rows
                held = await self._store.renew(self.worker)
                self._stop_cancelled_and_lost(before, held)
            except Exception:
                log.warning("could not renew the leases of %s", self.worker, exc_info=True)


def _as_json(result: Any) -> Any:
    """The result as stored JSON; a result that is not JSON fails the job (TypeError)."""
    try:
        return json.loads(json.dumps(result))
    except (TypeError, ValueError) as exc:
        raise TypeError(f"the job's result is not JSON: {exc}") from None


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
