"""The ``jobs`` settings section (environment: ``PLAUDIT_JOBS_<FIELD>``)."""

from __future__ import annotations

from pydantic import BaseModel, Field, model_validator


class JobsSettings(BaseModel):
    """How jobs run, prove they are alive, and how long their records are kept."""

    concurrency: int = Field(
        default=2, ge=1, le=64, description="jobs one process (server or worker) runs at once"
    )
    heartbeat_s: float = Field(
        default=10.0, gt=0, description="how often a process renews the lease of its jobs"
    )
    lease_s: float = Field(
        default=60.0,
        gt=0,
        description="a queued or running record whose lease is older than this belongs to a "
        "dead process: it is run again (or failed after max_attempts); every process checks "
        "the leases every heartbeat_s",
    )
    max_attempts: int = Field(
        default=3,
        ge=1,
        le=100,
        description="how many times a job may start; a job whose process died (or stopped) is "
        "run again, from its last checkpoint, until it has started this many times",
    )
    expire_after_s: float = Field(
        default=7 * 24 * 3600.0, gt=0, description="finished jobs are deleted after this long"
    )
    sweep_interval_s: float = Field(
        default=300.0,
        gt=0,
        description="how often finished jobs older than expire_after_s are deleted",
    )
    timeout_s: float = Field(
        default=6 * 3600.0, gt=0, description="a job running longer than this fails"
    )
    cancel_grace_s: float = Field(
        default=5.0,
        ge=0,
        description="a cancelled job that reaches no cancellation point (progress report) "
        "within this long has its task cancelled",
    )
    redis_retry_min_s: float = Field(
        default=0.5,
        gt=0,
        description="a worker that lost Redis first waits about this long before it tries "
        "again; each failed try doubles the wait",
    )
    redis_retry_max_s: float = Field(
        default=30.0, gt=0, description="the longest wait of a worker between Redis tries"
    )
    queue_name: str = Field(default="plaudit:jobs", description="the arq queue on Redis")

    @model_validator(mode="after")
    def _lease_outlives_heartbeats(self) -> JobsSettings:
        if self.lease_s <= self.heartbeat_s:
            raise ValueError("jobs.lease_s must be longer than jobs.heartbeat_s")
        return self
