"""Settings sections for retries and request cost (issue 9): ``idempotency`` and ``limits``.

The environment spells a field ``PLAUDIT_<SECTION>_<FIELD>``, e.g. ``PLAUDIT_IDEMPOTENCY_TTL_S``.
"""

from __future__ import annotations

from pydantic import BaseModel, Field


class IdempotencySettings(BaseModel):
    """How ``Idempotency-Key`` claims and stored answers behave."""

    ttl_s: float = Field(
        default=24 * 3600, ge=60, description="how long a stored answer is replayed"
    )
    lease_s: float = Field(
        default=30.0,
        gt=0,
        description="a claim not renewed for this long (its process died) may be taken over; "
        "a live request renews it every lease_s / 3",
    )
    wait_s: float = Field(
        default=300.0,
        gt=0,
        description="the longest a duplicate waits for the first request's answer before a 409",
    )
    cleanup_interval_s: float = Field(
        default=600.0, gt=0, description="how often expired records are deleted"
    )
