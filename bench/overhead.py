"""The overhead arithmetic of ``bench.bench_overhead``: phases in, ratio rows out (issue 19).

A *phase* is one load level: ``clients`` concurrent clients sending one route's requests back
to back, either through Plaudit or *direct* (the same upstream calls, with the exact bodies
Plaudit sent, straight to the stand-in judge: one "request" is the set of calls one Plaudit
request makes, sent at once as Plaudit does). A *row* pairs the two modes of one
(judge, route, clients) and gives their ratio, the upstream calls per request and Plaudit's
CPU time per upstream call. Pure functions, so a test can check them on a tiny run.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

DIRECT, PLAUDIT = "direct", "plaudit"


@dataclass(frozen=True)
class Phase:
    """What one load level measured. ``cpu_s`` and ``upstream_calls`` are deltas over it:
    the Plaudit server's process CPU time (0 for direct) and the calls the stand-in served."""

    judge: str
    route: str
    clients: int
    mode: str
    requests: int
    failed: int
    seconds: float
    upstream_calls: int
    cpu_s: float

    @property
    def rate(self) -> float:
        """Completed requests per second."""
        return self.requests / self.seconds if self.seconds > 0 else 0.0


@dataclass(frozen=True)
class Row:
    """Direct against through-Plaudit for one (judge, route, clients); medians over repeats."""

    judge: str
    route: str
    clients: int
    direct_rps: float
    plaudit_rps: float
    ratio: float
    calls_per_request: float
    cpu_ms_per_call: float | None
    failed: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def rows(phases: Iterable[Phase]) -> list[Row]:
    """One row per (judge, route, clients) that has both modes, in first-seen order."""
    grouped: dict[tuple[str, str, int], dict[str, list[Phase]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for phase in phases:
        grouped[(phase.judge, phase.route, phase.clients)][phase.mode].append(phase)
    return [
        _row(key, modes[DIRECT], modes[PLAUDIT])
        for key, modes in grouped.items()
        if modes[DIRECT] and modes[PLAUDIT]
    ]


def _row(key: tuple[str, str, int], direct: Sequence[Phase], through: Sequence[Phase]) -> Row:
    direct_rps = statistics.median(p.rate for p in direct)
    plaudit_rps = statistics.median(p.rate for p in through)
    return Row(
        judge=key[0],
        route=key[1],
        clients=key[2],
        direct_rps=direct_rps,
        plaudit_rps=plaudit_rps,
        ratio=plaudit_rps / direct_rps if direct_rps > 0 else 0.0,
        calls_per_request=statistics.median(_calls_per_request(p) for p in through),
        cpu_ms_per_call=cpu_ms_per_call(through),
        failed=sum(p.failed for p in [*direct, *through]),
    )


def _calls_per_request(phase: Phase) -> float:
    return phase.upstream_calls / phase.requests if phase.requests else 0.0


def cpu_ms_per_call(phases: Sequence[Phase]) -> float | None:
    """Plaudit's CPU milliseconds per upstream call, over all the given phases together."""
    calls = sum(p.upstream_calls for p in phases)
    return 1000 * sum(p.cpu_s for p in phases) / calls if calls else None


def markdown(table: Sequence[Row]) -> str:
    """The rows as a BENCHMARKS.md table."""
    lines = [
        "| judge | route | clients | direct req/s | through Plaudit req/s | ratio "
        "| upstream calls/req | Plaudit CPU ms/call | failed |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in table:
        cpu = "-" if r.cpu_ms_per_call is None else f"{r.cpu_ms_per_call:.2f}"
        lines.append(
            f"| {r.judge} | {r.route} | {r.clients} | {r.direct_rps:,.1f} | "
            f"{r.plaudit_rps:,.1f} | {r.ratio:.3f} | {r.calls_per_request:.1f} | {cpu} "
            f"| {r.failed} |"
        )
    return "\n".join(lines)


def profile_shares(
    collapsed: Iterable[str],
    groups: dict[str, Sequence[str]],
    *,
    within: str = "",
    skip: Sequence[str] = (),
) -> dict[str, float]:
    """Share of samples per group from py-spy's ``--format raw`` (collapsed stacks).

    Each line is ``root;...;leaf count``. Only stacks that contain ``within`` (the event
    loop's thread) and none of ``skip`` (imports at start-up) count. A sample goes to the
    group of its leaf-most frame that holds one of the group's markers (so JSON encoding
    called by httpx counts as httpx); a stack with no marked frame is ``other``.
    """
    counts: dict[str, int] = defaultdict(int)
    total = 0
    for line in collapsed:
        stack, _, number = line.rstrip().rpartition(" ")
        if not stack or not number.isdigit() or within not in stack:
            continue
        if any(mark in stack for mark in skip):
            continue
        total += int(number)
        counts[_group_of(stack.split(";"), groups)] += int(number)
    return {name: counts[name] / total for name in [*groups, "other"]} if total else {}


def _group_of(frames: Sequence[str], groups: dict[str, Sequence[str]]) -> str:
    for frame in reversed(frames):
        for name, marks in groups.items():
            if any(mark in frame for mark in marks):
                return name
    return "other"
