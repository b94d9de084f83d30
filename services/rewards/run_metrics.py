"""Prometheus metrics per training run and reward channel (issue 10: seeing a run).

For every group scored with a ``run_id``: each channel's running mean and spread over the run,
its failures, the judge's tie rate and order consistency (``judge_pairwise``), and the
correlation of the total reward with the completion's length over the run, the first sign of
a length hack. The statistics are running sums kept in this process; the metrics of the
oldest runs are dropped beyond ``max_runs`` so the label set stays bounded.
"""

from __future__ import annotations

import contextlib
import math
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge

from plaudit_wire.rewards import RewardsGroupResponse
from plaudit_wire.schemas import VALUED_STATUSES

PAIRWISE = "judge_pairwise"


@dataclass
class Moments:
    """Running sums of one or two variables: count, means, spread and correlation."""

    n: int = 0
    sx: float = 0.0
    sy: float = 0.0
    sxx: float = 0.0
    syy: float = 0.0
    sxy: float = 0.0

    def add(self, x: float, y: float = 0.0) -> None:
        self.n += 1
        self.sx += x
        self.sy += y
        self.sxx += x * x
        self.syy += y * y
        self.sxy += x * y

    @property
    def mean(self) -> float:
        return self.sx / self.n if self.n else math.nan

    @property
    def std(self) -> float:
        if self.n < 2:
            return 0.0
        return math.sqrt(max(0.0, self.sxx / self.n - self.mean**2))

    @property
    def correlation(self) -> float:
        """Pearson's r of x and y; NaN while either has no spread."""
        if self.n < 2:
            return math.nan
        cov = self.sxy / self.n - (self.sx / self.n) * (self.sy / self.n)
        vx = self.sxx / self.n - (self.sx / self.n) ** 2
        vy = self.syy / self.n - (self.sy / self.n) ** 2
        if vx <= 1e-12 or vy <= 1e-12:
            return math.nan
        return cov / math.sqrt(vx * vy)


@dataclass
class _Run:
    channels: dict[str, Moments] = field(default_factory=dict)
    length: Moments = field(default_factory=Moments)
    ties: Moments = field(default_factory=Moments)
    consistency: Moments = field(default_factory=Moments)


class RunMetrics:
    """Per-run gauges and counters on ``registry``."""

    def __init__(self, registry: CollectorRegistry, *, max_runs: int = 100) -> None:
        self._runs: OrderedDict[str, _Run] = OrderedDict()
        self._max_runs = max_runs
        labels = ["run", "channel"]
        self.groups = Counter(
            "plaudit_run_groups", "Groups scored for a run", ["run"], registry=registry
        )
        self.mean = Gauge(
            "plaudit_run_channel_mean",
            "A channel's mean value over a run's ok completions",
            labels,
            registry=registry,
        )
        self.std = Gauge(
            "plaudit_run_channel_std",
            "A channel's spread (std) over a run's ok completions",
            labels,
            registry=registry,
        )
        self.failures = Counter(
            "plaudit_run_channel_failures",
            "Completions a channel could not score, per run",
            labels,
            registry=registry,
        )
        self.tie_rate = Gauge(
            "plaudit_run_judge_tie_rate",
            "Share of completions the pairwise judge left tied, over a run",
            ["run"],
            registry=registry,
        )
        self.consistency = Gauge(
            "plaudit_run_judge_consistency",
            "Share of pairwise verdicts that held when the order was swapped, over a run",
            ["run"],
            registry=registry,
        )
        self.length_correlation = Gauge(
            "plaudit_run_length_correlation",
            "Pearson correlation of the total reward with completion length (characters) over "
            "a run: a rising value is the first sign of a length hack",
            ["run"],
            registry=registry,
        )

    def observe(self, run_id: str, response: RewardsGroupResponse, texts: Sequence[str]) -> None:
        """Add one scored group of ``run_id`` (``texts``: its completions, for their lengths)."""
        run = self._run(run_id)
        self.groups.labels(run_id).inc()
        for result, text in zip(response.results, texts, strict=True):
            if result.total is not None:
                run.length.add(float(len(text)), result.total)
            for name, channel in result.channels.items():
                moments = run.channels.setdefault(name, Moments())
                if channel.status in VALUED_STATUSES and channel.value is not None:
                    moments.add(channel.value)
                else:
                    self.failures.labels(run_id, name).inc()
                if name == PAIRWISE and "tie" in channel.detail:
                    run.ties.add(1.0 if channel.detail["tie"] else 0.0)
        for name, moments in run.channels.items():
            if moments.n:
                self.mean.labels(run_id, name).set(moments.mean)
                self.std.labels(run_id, name).set(moments.std)
        pairwise = next(
            (
                r.channels["judge_pairwise"]
                for r in response.results
                if "judge_pairwise" in r.channels
            ),
            None,
        )
        rate = pairwise.meta.get("inconsistency_rate") if pairwise is not None else None
        if isinstance(rate, int | float):
            run.consistency.add(1.0 - float(rate))
            self.consistency.labels(run_id).set(run.consistency.mean)
        if run.ties.n:
            self.tie_rate.labels(run_id).set(run.ties.mean)
        self.length_correlation.labels(run_id).set(run.length.correlation)

    def _run(self, run_id: str) -> _Run:
        run = self._runs.get(run_id)
        if run is None:
            run = self._runs[run_id] = _Run()
            while len(self._runs) > self._max_runs:
                self._forget(*self._runs.popitem(last=False))
        else:
            self._runs.move_to_end(run_id)
        return run

    def _forget(self, run_id: str, run: _Run) -> None:
        for metric in (self.groups, self.tie_rate, self.consistency, self.length_correlation):
            with contextlib.suppress(KeyError):
                metric.remove(run_id)
        for name in run.channels:
            for metric in (self.mean, self.std, self.failures):
                with contextlib.suppress(KeyError):
                    metric.remove(run_id, name)
