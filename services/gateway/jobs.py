"""Every job function the services register, for the serving processes and ``plaudit worker``."""

from __future__ import annotations

from services.core.jobs import JobRegistry


def job_registry() -> JobRegistry:
    """A fresh registry with every service's jobs (none of the first services need one)."""
    return JobRegistry()
