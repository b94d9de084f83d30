"""Failing the jobs of dead processes and deleting expired records, at start-up and then
every ``sweep_interval_s``.

A job is abandoned when the process holding it is gone: on this host its pid no longer
exists (or belongs to a new process), anywhere its lease is older than ``lease_s``. The lease
alone would do; the pid check lets a restarted server fail its predecessor's jobs at once
instead of a lease later. Every process sweeps; the store's conditional updates make
concurrent sweeps harmless.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from services.core.jobs.runner import is_own_worker
from services.core.jobs.settings import JobsSettings
from services.core.jobs.store import JobStore, as_utc
from services.core.models import Job, utcnow

log = logging.getLogger(__name__)

#: For queued jobs no process holds (arq): a reason when the queue has lost the job, else None.
LostCheck = Callable[[Job], Awaitable[str | None]]


@dataclass(frozen=True)
class SweepResult:
    failed: int
    deleted: int


class Sweeper:
    """Runs :meth:`sweep` now and then every ``sweep_interval_s`` until closed."""

    def __init__(
        self, store: JobStore, settings: JobsSettings, lost: LostCheck | None = None
    ) -> None:
        self._store = store
        self._settings = settings
        self._lost = lost
        self._loop: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Sweep once (start-up recovery), then keep sweeping in the background."""
        await self._sweep_logged()
        self._loop = asyncio.create_task(self._every_interval(), name="jobs-sweeper")

    async def close(self) -> None:
        if self._loop is not None:
            self._loop.cancel()
            await asyncio.gather(self._loop, return_exceptions=True)

    async def sweep(self) -> SweepResult:
        now = utcnow()
        failed = 0
        for job in await self._store.active():
            reason = self.abandoned(job, now) or await self._lost_from_queue(job, now)
            if reason is not None and await self._store.fail_abandoned(job, reason):
                log.warning("job %s (%s) failed: %s", job.id, job.kind, reason)
                failed += 1
        cutoff = now - timedelta(seconds=self._settings.expire_after_s)
        deleted = await self._store.delete_finished_before(cutoff)
        return SweepResult(failed, deleted)

    def abandoned(self, job: Job, now: datetime) -> str | None:
        """Why ``job``'s holder is dead, or None while it may be alive."""
        if job.worker is None:
            return None
        if _gone_from_this_host(job.worker):
            return f"the process running it ({job.worker}) is gone"
        lease = timedelta(seconds=self._settings.lease_s)
        if job.heartbeat_at is not None and as_utc(job.heartbeat_at) < now - lease:
            return (
                f"the process running it ({job.worker}) stopped renewing its lease "
                f"(last renewed {as_utc(job.heartbeat_at).isoformat(timespec='seconds')})"
            )
        return None

    async def _lost_from_queue(self, job: Job, now: datetime) -> str | None:
        young = as_utc(job.created_at) > now - timedelta(seconds=self._settings.lease_s)
        if self._lost is None or job.worker is not None or job.state != "queued" or young:
            return None
        return await self._lost(job)

    async def _sweep_logged(self) -> None:
        try:
            result = await self.sweep()
        except Exception:
            log.warning("the job sweep failed; retrying later", exc_info=True)
            return
        if result.failed or result.deleted:
            log.info(
                "job sweep: %d abandoned failed, %d expired deleted", result.failed, result.deleted
            )

    async def _every_interval(self) -> None:
        while True:
            await asyncio.sleep(self._settings.sweep_interval_s)
            await self._sweep_logged()


def _gone_from_this_host(worker: str) -> bool:
    """True when ``worker`` ran on this host and its process is not running any more."""
    host, _, rest = worker.partition(":")
    pid_text, _, _ = rest.partition(":")
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    pid = int(pid_text)
    if pid == os.getpid():  # our pid: ours, or a predecessor's whose pid we were given
        return not is_own_worker(worker)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # someone else's live process
        return False
    return False
