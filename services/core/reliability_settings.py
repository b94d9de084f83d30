"""Settings sections of issue 9 (reliability): ``idempotency``, ``limits`` and ``security``.

The environment spells a field ``PLAUDIT_<SECTION>_<FIELD>``, e.g. ``PLAUDIT_IDEMPOTENCY_TTL_S``.
"""

from __future__ import annotations

from typing import Literal

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


class LimitsSettings(BaseModel):
    """What one request may cost (issue 9). The OpenAPI schema shows the values in force."""

    max_body_bytes: int = Field(
        default=16 * 1024 * 1024,
        ge=1024,
        description="request body size; larger bodies get 413 before they are parsed",
    )
    max_text_chars: int = Field(
        default=100_000,
        ge=1,
        description="characters in one text (a prompt, a message, a completion) on every route",
    )
    max_new_tokens: int = Field(
        default=1024, ge=1, description="the largest generate-mode max_new_tokens a request may ask"
    )
    request_timeout_s: float = Field(
        default=300.0,
        gt=0,
        description="a request still running after this long is stopped and answered 504",
    )
    offload_min_values: int = Field(
        default=20_000,
        ge=0,
        description="ordinal requests with at least this many scores are computed in a worker "
        "thread, so they do not hold up the event loop",
    )


class SecuritySettings(BaseModel):
    """API key hygiene and what ``/metrics`` requires (issue 9)."""

    min_key_chars: int = Field(
        default=16,
        ge=1,
        description="shorter API keys draw a warning at start, are refused for a non-loopback "
        "host, and are accepted from loopback callers only",
    )
    metrics_scope: Literal["reward", "admin", "open"] | None = Field(
        default=None,
        description="the scope /metrics requires; default: admin when API keys are set (its "
        "series name every tenant's run ids, issue 23), open without keys; 'open' opens it",
    )
