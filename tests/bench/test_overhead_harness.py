"""The overhead benchmark's arithmetic (bench/overhead.py) and one tiny real run of the harness
(bench/bench_overhead.py: the stand-in judge and a real ``plaudit serve judge``). No timing is
asserted: only that the figures it reports are computed from what it measured."""

from __future__ import annotations

import math

import pytest

from bench import bench_overhead
from bench.overhead import DIRECT, PLAUDIT, Phase, cpu_ms_per_call, markdown, profile_shares, rows


def _phase(mode: str, requests: int, seconds: float, calls: int = 0, cpu: float = 0.0) -> Phase:
    return Phase("50ms", "pairwise", 64, mode, requests, 0, seconds, calls, cpu)


def test_a_row_is_plaudit_over_direct_with_cpu_per_upstream_call() -> None:
    [row] = rows([_phase(DIRECT, 100, 2.0), _phase(PLAUDIT, 30, 1.5, calls=60, cpu=0.09)])
    assert row.direct_rps == 50.0 and row.plaudit_rps == 20.0
    assert row.ratio == pytest.approx(0.4)
    assert row.calls_per_request == 2.0
    assert row.cpu_ms_per_call == pytest.approx(1.5)
    assert "| 50ms | pairwise | 64 | 50.0 | 20.0 | 0.400 | 2.0 | 1.50 | 0 |" in markdown([row])


def test_repeats_take_the_median_rate_and_cpu_over_all_calls() -> None:
    phases = [
        _phase(DIRECT, 10, 1.0),
        _phase(DIRECT, 30, 1.0),
        _phase(DIRECT, 20, 1.0),
        _phase(PLAUDIT, 5, 1.0, calls=10, cpu=0.01),
        _phase(PLAUDIT, 15, 1.0, calls=30, cpu=0.05),
    ]
    [row] = rows(phases)
    assert (row.direct_rps, row.plaudit_rps, row.ratio) == (20.0, 10.0, 0.5)
    assert row.cpu_ms_per_call == pytest.approx(1000 * 0.06 / 40)


def test_a_level_measured_in_one_mode_only_has_no_row() -> None:
    assert rows([_phase(DIRECT, 10, 1.0)]) == []
    assert cpu_ms_per_call([_phase(DIRECT, 10, 1.0)]) is None


def test_profile_samples_go_to_the_leaf_most_marked_frame() -> None:
    collapsed = [
        "run (uvicorn/server.py:1);post (httpx/_client.py:2);dumps (json/__init__.py:3) 6",
        "run (uvicorn/server.py:1);handle (starlette/routing.py:9) 3",
        "select (selectors.py:4) 1",
        "garbage",
    ]
    groups = {"http": ["httpx/"], "web": ["uvicorn/", "starlette/"]}
    assert profile_shares(collapsed, groups) == {"http": 0.6, "web": 0.3, "other": 0.1}


def test_a_tiny_real_run_reports_ratios_of_what_it_measured() -> None:
    args = "--service judge --judges instant --routes pairwise group --clients 1 2 --requests 3"
    result = bench_overhead.main(args.split())
    phases = [Phase(**p) for p in result["phases"]]
    assert len(phases) == 2 * 2 * 2  # routes x client counts x modes
    assert all(p.requests == 3 and p.failed == 0 for p in phases)
    by_key = {(p.route, p.clients, p.mode): p for p in phases}
    for row in result["rows"]:
        direct = by_key[(row["route"], row["clients"], DIRECT)]
        through = by_key[(row["route"], row["clients"], PLAUDIT)]
        assert math.isclose(row["ratio"], through.rate / direct.rate)
        assert row["cpu_ms_per_call"] == pytest.approx(
            1000 * through.cpu_s / through.upstream_calls
        )
        assert through.cpu_s >= 0 and direct.cpu_s == 0  # CPU time ticks are 10 ms: may be 0
        # Direct replays exactly the calls Plaudit made: as many per request, both ways.
        assert direct.upstream_calls == through.upstream_calls
    calls = {row["route"]: row["calls_per_request"] for row in result["rows"]}
    assert calls["pairwise"] == 2.0  # both orders
    assert 1.0 <= calls["group"] <= 56.0  # G=8 round robin, both orders (fewer if batched)
