"""Resuming the jobs of dead processes and deleting expired records.

A job is abandoned when the process holding it is gone: on this host its pid no longer
exists (or belongs to a new process), anywhere its lease is older than ``lease_s``. The lease
alone would do; the pid check lets a restarted server resume its predecessor's jobs at once
instead of a lease later. Every process checks the leases every ``heartbeat_s`` (issue 23: a
dead worker's job is noticed within a lease, not at the next 300 s sweep) and queues an
abandoned job again, from its last checkpoint, until it has started ``max_attempts`` times;
then it fails with the reason. Expired records are deleted every ``sweep_interval_s``. The
store's conditional updates make concurrent sweeps harmless.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from services.core.db.tables import Job, as_utc, utcnow
from services.core.jobs.runner import is_own_worker
from services.core.jobs.settings import JobsSettings
from services.core.jobs.store import JobStore

log = logging.getLogger(__name__)

#: For queued jobs no process holds (arq): a reason when the queue has lost the job, else None.
LostCheck = Callable[[Job], Awaitable[str | None]]
#: Queue an abandoned job again (with the reason); False when another process got there first.
Resume = Callable[[Job, str], Awaitable[bool]]


@dataclass(frozen=True)
class SweepResult:
    resumed: int
    failed: int
    deleted: int


class Sweeper:
    """Recovers abandoned jobs now and every ``heartbeat_s``, and deletes expired records
    every ``sweep_interval_s``, until closed."""

    def __init__(
        self,
        store: JobStore,
        settings: JobsSettings,
        resume: Resume,
        lost: LostCheck | None = None,
    ) -> None:
        self._store = store
        self._settings = settings
        self._resume = resume
        self._lost = lost
        self._loop: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Sweep once (start-up recovery), then keep sweeping in the background."""
        await self._logged(self.sweep)
        self._loop = asyncio.create_task(self._every_beat(), name="jobs-sweeper")

    async def close(self) -> None:
        if self._loop is not None:
            self._loop.cancel()
            await asyncio.gather(self._loop, return_exceptions=True)

    async def sweep(self) -> SweepResult:
        """Recover abandoned jobs and delete expired records."""
        resumed, failed = await self.recover()
        cutoff = utcnow() - timedelta(seconds=self._settings.expire_after_s)
        deleted = await self._store.delete_finished_before(cutoff)
        return SweepResult(resumed, failed, deleted)

    async def recover(self) -> tuple[int, int]:
        """Queue every abandoned job again, or fail it once it used its attempts; returns
        (resumed, failed)."""
        now = utcnow()
        resumed = failed = 0
        for job in await self._store.active():
            reason = self.abandoned(job, now) or await self._lost_from_queue(job, now)
            if reason is None:
                continue
            if job.attempts >= self._settings.max_attempts:
                failed += await self._fail(job, reason)
            elif await self._resume(job, reason):
                log.warning(
                    "job %s (%s) queued again after %d attempts: %s",
                    job.id,
                    job.kind,
                    job.attempts,
                    reason,
                )
                resumed += 1
        return resumed, failed

    async def _fail(self, job: Job, reason: str) -> int:
        why = f"{reason}; it started {job.attempts} times (jobs.max_attempts)"
        if not await self._store.fail_abandoned(job, why):
            return 0
        log.warning("job %s (%s) failed: %s", job.id, job.kind, why)
        return 1

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

    async def _logged(self, step: Callable[[], Awaitable[SweepResult]]) -> None:
        try:
            result = await step()
        except Exception:
            log.warning("the job sweep failed; retrying later", exc_info=True)
            return
        if result.resumed or result.failed or result.deleted:
            log.info(
                "job sweep: %d abandoned queued again, %d failed, %d expired deleted",
                result.resumed,
                result.failed,
                result.deleted,
            )

    async def _recover_only(self) -> SweepResult:
        resumed, failed = await self.recover()
        return SweepResult(resumed, failed, 0)

    async def _every_beat(self) -> None:
        since_sweep = 0.0
        while True:
            await asyncio.sleep(self._settings.heartbeat_s)
            since_sweep += self._settings.heartbeat_s
            if since_sweep >= self._settings.sweep_interval_s:
                since_sweep = 0.0
                await self._logged(self.sweep)
            else:
                await self._logged(self._recover_only)


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
