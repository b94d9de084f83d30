"""Prometheus metrics, one registry per app so several apps can live in one process (tests)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from judges.model_worker import BatchRecord

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
_BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


class Metrics:
    """Request latency per route and the size of every model batch."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.request_latency = Histogram(
            "plaudit_request_latency_seconds",
            "HTTP request latency by route template",
            ["method", "route", "status"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.model_batch_size = Histogram(
            "plaudit_model_batch_size",
            "Rows per model worker call after merging concurrent requests",
            ["model"],
            buckets=_BATCH_BUCKETS,
            registry=self.registry,
        )
        self.model_batch_requests = Histogram(
            "plaudit_model_batch_requests",
            "Requests merged into one model call",
            ["model"],
            buckets=_BATCH_BUCKETS,
            registry=self.registry,
        )
        self.judge_cache = Counter(
            "plaudit_judge_cache_total",
            "Judge backend lookups by outcome (hit, miss, shared in-flight, unavailable: the "
            "cache could not be reached and the judge ran without it)",
            ["outcome"],
            registry=self.registry,
        )
        self.judge_verdict_fallback = Counter(
            "plaudit_judge_verdict_fallback_total",
            "Choice items asked for logprobs that the judge server answered without them, so "
            "that item (only) was scored from a parsed verdict (issue 19)",
            registry=self.registry,
        )
        self.idempotency = Counter(
            "plaudit_idempotency_total",
            "Requests with an Idempotency-Key by outcome (computed, replayed, conflict, "
            "taken_over, in_progress)",
            ["outcome"],
            registry=self.registry,
        )
        self.errors = Counter(
            "plaudit_errors_total",
            "Error answers by type",
            ["type"],
            registry=self.registry,
        )

    def observe_batch(self, record: BatchRecord) -> None:
        """Record one model worker call (its rows and how many requests it merged)."""
        self.model_batch_size.labels(record.worker).observe(record.rows)
        self.model_batch_requests.labels(record.worker).observe(record.requests)

    def render(self) -> bytes:
        """The registry in Prometheus text format."""
        return generate_latest(self.registry)
