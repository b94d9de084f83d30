"""What a job function sees, and the registry of job functions by name."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from services.core.jobs.store import JobStore


class JobCancelled(Exception):
    """Raised inside a job at a cancellation point after someone cancelled it."""


class JobContext:
    """The running job's id and owner, its progress reports and its cancellation flag.

    ::

        async def count(ctx: JobContext, params: dict[str, Any]) -> dict[str, int]:
            start = ctx.checkpoint or 0  # where a retried job resumes
            for i in range(start, params["n"]):
                await ctx.progress(i + 1, params["n"], "counting")  # a cancellation point
                await ctx.save_checkpoint(i + 1)
            return {"counted": params["n"]}
    """

    def __init__(
        self,
        job_id: str,
        kind: str,
        owner: str | None,
        worker: str,
        store: JobStore,
        *,
        attempt: int = 1,
        checkpoint: Any = None,
    ) -> None:
        self.job_id = job_id
        self.kind = kind
        self.owner = owner
        self.worker = worker
        """The process running the job (``host:pid:role-token``)."""
        self.attempt = attempt
        """1 on the first run; more when a dead process's job runs again (issue 23)."""
        self.checkpoint = checkpoint
        """What an earlier attempt saved with :meth:`save_checkpoint` (None: start afresh)."""
        self._store = store
        self.cancel_requested = False

    async def save_checkpoint(self, checkpoint: Any) -> None:
        """Keep ``checkpoint`` (JSON) in the record: a retry after this process dies starts
        from it, as :attr:`checkpoint`. Save only what is complete (stored results, a finished
        epoch), since a retry skips what the checkpoint says is done."""
        await asyncio.shield(self._store.save_checkpoint(self.job_id, self.worker, checkpoint))
        self.checkpoint = checkpoint

    async def progress(self, done: int, total: int | None = None, stage: str | None = None) -> None:
        """Record progress (``total`` and ``stage`` kept when None); raises JobCancelled when
        the job was cancelled meanwhile."""
        # Shielded: a cancel landing here must not cut a database write in half.
        if await asyncio.shield(self._store.report(self.job_id, done, total, stage)):
            self.cancel_requested = True
        self.raise_if_cancelled()

    def raise_if_cancelled(self) -> None:
        """A cancellation point for work that does not await (a loop in a worker thread)."""
        if self.cancel_requested:
            raise JobCancelled(f"job {self.job_id} was cancelled")


JobFunction = Callable[[JobContext, dict[str, Any]], Awaitable[Any]]


@dataclass
class JobRegistry:
    """Job functions by name; the same names on every server and worker process."""

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

    def __contains__(self, name: object) -> bool:
        return name in self.functions
