"""Timeouts and the retry policy of the clients.

>>> Timeouts(read=300.0).to_httpx().read
300.0
>>> RetryPolicy(max_retries=5, max_backoff=4.0).max_retries
5
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from plaudit_wire.retry import Backoff
from trainer_client.errors import PlauditConnectionError, PlauditError, PlauditTimeout

__all__ = ["RetryPolicy", "Timeouts"]

#: 429 (backpressure), 502/504 (a proxy or upstream failed), 503 (a backend is down).
#: 500 is not here: Plaudit answers it for a bug, which a retry does not fix.
RETRY_STATUSES = frozenset({429, 502, 503, 504})

# Failures where the request may never have reached the application, or where retrying is
# harmless because the client sends an Idempotency-Key; a protocol or proxy misconfiguration is
# not among them.
_NOT_RETRIED_TRANSPORT = (httpx.UnsupportedProtocol, httpx.LocalProtocolError, httpx.ProxyError)


@dataclass(frozen=True)
class Timeouts:
    """Per-phase timeouts in seconds (None waits forever).

    ``read`` bounds the wait for the answer, so give it room for judge calls on a big model.
    """

    connect: float | None = 5.0
    read: float | None = 60.0
    write: float | None = 30.0
    pool: float | None = 10.0

    def to_httpx(self) -> httpx.Timeout:
        return httpx.Timeout(connect=self.connect, read=self.read, write=self.write, pool=self.pool)


def as_httpx_timeout(timeout: Timeouts | httpx.Timeout | float | None) -> httpx.Timeout:
    """Accept our :class:`Timeouts`, an ``httpx.Timeout``, or one number for every phase."""
    if isinstance(timeout, Timeouts):
        return timeout.to_httpx()
    if isinstance(timeout, httpx.Timeout):
        return timeout
    return httpx.Timeout(timeout)


#: Answers that mean the server (or a proxy before it) is down or restarting.
OUTAGE_STATUSES = frozenset({502, 503, 504})


@dataclass(frozen=True)
class RetryPolicy(Backoff):
    """How a failed call is retried: :class:`plaudit_wire.retry.Backoff`, the one policy of
    Plaudit's HTTP callers (the judge's OpenAI-compatible backend waits the same way).

    Retry ``n`` (0-based) waits a uniform draw from ``[0, min(max_backoff, backoff * 2**n)]``
    (the "full jitter" of AWS's *Exponential Backoff And Jitter*), and never less than the
    server's Retry-After. A Retry-After above ``max_retry_after`` is not waited out: the error
    is raised at once, carrying ``retry_after``, for the caller to decide.
    ``max_retries=0`` disables retries.

    A server that is down or restarting (connection refused or dropped, 502/503/504) is retried
    past ``max_retries`` for as long as the waits add up to at most ``outage_budget`` seconds
    (default 5 minutes: a restart that reloads models takes one or two), with a log line per
    wait; then the error is raised. ``outage_budget=0`` keeps to ``max_retries``.
    """

    outage_budget: float = 300.0
    statuses: frozenset[int] = RETRY_STATUSES

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.outage_budget < 0:
            raise ValueError("outage_budget must be >= 0")

    def is_retryable(self, error: PlauditError) -> bool:
        """True for timeouts, dropped connections and the retryable statuses."""
        if isinstance(error, PlauditTimeout):
            return True
        if isinstance(error, PlauditConnectionError):
            return not isinstance(error.__cause__, _NOT_RETRIED_TRANSPORT)
        return error.status_code in self.statuses

    def is_outage(self, error: PlauditError) -> bool:
        """True when the server looks down or restarting rather than refusing this call."""
        if isinstance(error, PlauditConnectionError):
            return not isinstance(error.__cause__, _NOT_RETRIED_TRANSPORT)
        return error.status_code in OUTAGE_STATUSES

    def next_delay(
        self,
        error: PlauditError,
        retries_done: int,
        limit: int | None,
        outage_waited: float = 0.0,
    ) -> float | None:
        """The wait before the next attempt, or None when ``error`` should be raised now.

        ``outage_waited``: the seconds already waited on this call for outage errors.
        """
        if not self.is_retryable(error):
            return None
        if error.retry_after is not None and error.retry_after > self.max_retry_after:
            return None
        max_retries = self.max_retries if limit is None else limit
        if retries_done < max_retries:
            return self.delay(retries_done, error.retry_after)
        riding_out = limit is None and self.max_retries > 0 and self.is_outage(error)
        left = self.outage_budget - outage_waited
        if not riding_out or left <= 0:
            return None
        return min(left, self.delay(min(retries_done, 32), error.retry_after))
