"""Plaudit's domain errors. Core code raises these; one handler turns them into the envelope.

Envelope: ``{"error": {"type", "message", "param", "request_id"}}``.
"""

from __future__ import annotations


class PlauditError(Exception):
    """Base of every error that becomes an HTTP answer."""

    status_code = 500
    error_type = "internal_error"

    def __init__(self, message: str, *, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param

    @property
    def headers(self) -> dict[str, str]:
        """Extra response headers (Retry-After for backpressure)."""
        return {}


class InvalidInput(PlauditError):
    """The request is well-formed JSON but its values are not acceptable."""

    status_code = 422
    error_type = "invalid_request"


class Unauthorized(PlauditError):
    status_code = 401
    error_type = "unauthorized"


class Forbidden(PlauditError):
    status_code = 403
    error_type = "forbidden"


class NotFound(PlauditError):
    status_code = 404
    error_type = "not_found"


class PayloadTooLarge(PlauditError):
    """The body is larger than ``limits.max_body_bytes`` (refused before it is parsed)."""

    status_code = 413
    error_type = "payload_too_large"


class Conflict(PlauditError):
    status_code = 409
    error_type = "conflict"


class _RetryableError(PlauditError):
    def __init__(
        self, message: str, *, param: str | None = None, retry_after: float | None = None
    ) -> None:
        super().__init__(message, param=param)
        self.retry_after = retry_after

    @property
    def headers(self) -> dict[str, str]:
        if self.retry_after is None:
            return {}
        return {"Retry-After": str(max(1, round(self.retry_after)))}


class Overloaded(_RetryableError):
    """Backpressure: the caller should retry after ``retry_after`` seconds."""

    status_code = 429
    error_type = "overloaded"


class BackendUnavailable(_RetryableError):
    """A model, database or judge backend cannot answer now."""

    status_code = 503
    error_type = "backend_unavailable"


class UpstreamTimeout(_RetryableError):
    status_code = 504
    error_type = "upstream_timeout"


class DeadlineExceeded(UpstreamTimeout):
    """The request ran past ``limits.request_timeout_s`` and was stopped."""

    error_type = "deadline_exceeded"


class RequestInProgress(Conflict):
    """A request with this Idempotency-Key is still being computed (IETF idempotency draft)."""

    error_type = "request_in_progress"

    def __init__(self, message: str, *, param: str | None = None, retry_after: float) -> None:
        super().__init__(message, param=param)
        self.retry_after = retry_after

    @property
    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(max(1, round(self.retry_after)))}


class DatabaseUnavailable(BackendUnavailable):
    """The database refused or dropped the connection; the request stored nothing."""

    error_type = "database_unavailable"


class CacheUnavailable(BackendUnavailable):
    """Redis (cache, job queue) cannot be reached."""

    error_type = "cache_unavailable"
