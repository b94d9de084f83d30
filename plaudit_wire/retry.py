"""The one retry policy and the one ``Retry-After`` parser of Plaudit's HTTP callers.

The trainer client (calling Plaudit) and the OpenAI-compatible judge backend (calling vLLM,
SGLang or a hosted API) wait the same way between attempts: exponential backoff with full
jitter (AWS's *Exponential Backoff And Jitter*: a uniform draw from ``[0, cap]`` keeps a fleet
of callers from retrying in step), never less than the server's ``Retry-After``.

>>> policy = Backoff(backoff=1.0, max_backoff=2.0, jitter=lambda low, high: high)
>>> [policy.delay(n) for n in range(3)], policy.delay(0, retry_after=5.0)
([1.0, 2.0, 2.0], 5.0)
>>> parse_retry_after("3"), parse_retry_after("soon")
(3.0, None)
"""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["Backoff", "parse_retry_after"]


@dataclass(frozen=True)
class Backoff:
    """How long to wait before retry ``n`` (0-based), and how many retries there are.

    Retry ``n`` waits a uniform draw from ``[0, min(max_backoff, backoff * 2**n)]``, and never
    less than a ``Retry-After`` value, which counts up to ``max_retry_after`` seconds (what a
    caller does with a longer one is its own choice: the client raises at once).
    ``max_retries=0`` disables retries; ``jitter`` is the draw, replaceable in tests.
    """

    max_retries: int = 3
    backoff: float = 0.5
    max_backoff: float = 8.0
    max_retry_after: float = 60.0
    jitter: Callable[[float, float], float] = field(
        default=random.uniform, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        if self.backoff < 0 or self.max_backoff < 0:
            raise ValueError("backoff and max_backoff must be >= 0")

    def delay(self, retry: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number ``retry`` (0-based)."""
        cap = min(self.max_backoff, self.backoff * 2.0**retry)
        wait = self.jitter(0.0, cap)
        if retry_after is None:
            return wait
        return max(wait, min(retry_after, self.max_retry_after))


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header: delta-seconds or an HTTP date.

    None for a missing or unreadable value; a date in the past is 0.

    >>> parse_retry_after("Wed, 21 Oct 2015 07:28:30 GMT", now=1445412480.0)
    30.0
    """
    if value is None or not value.strip():
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    current = time.time() if now is None else now
    return max(0.0, when.timestamp() - current)
