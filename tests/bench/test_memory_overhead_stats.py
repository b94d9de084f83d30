"""The paired-ratio arithmetic of the revision-overhead bench (issue 24), on fixed phases."""

from __future__ import annotations

from typing import Any

import pytest

from bench.bench_memory_overhead import paired_ratios, spread


def _phases(*rates: tuple[str, float]) -> list[dict[str, Any]]:
    return [{"mode": mode, "groups_per_s": rate} for mode, rate in rates]


def test_each_phase_is_compared_with_the_off_phases_beside_it() -> None:
    # The load drifts down by half over the run; revision costs 10% at every level.
    phases = _phases(("off", 2.0), ("on", 1.62), ("off", 1.6), ("on", 1.26), ("off", 1.2))
    ratios = paired_ratios(phases, "on")
    assert ratios == pytest.approx([0.9, 0.9])
    assert spread(ratios)["overhead_pct"] == 10.0


def test_a_phase_at_an_edge_uses_its_one_neighbour_and_other_modes_are_skipped() -> None:
    phases = _phases(("on", 0.5), ("memory", 9.0), ("off", 1.0), ("memory", 0.8), ("on", 0.7))
    assert paired_ratios(phases, "on") == [0.5, 0.7]
    assert paired_ratios(phases, "memory") == [9.0, 0.8]
    assert paired_ratios(_phases(("on", 1.0)), "on") == []


def test_spread_reports_the_median_quartiles_range_and_overhead() -> None:
    summary = spread([0.9, 1.02, 0.96, 0.94, 0.98])
    assert summary == {
        "n": 5,
        "median": 0.96,
        "q1": 0.94,
        "q3": 0.98,
        "min": 0.9,
        "max": 1.02,
        "overhead_pct": 4.0,
    }
    assert spread([0.97])["q1"] == spread([0.97])["q3"] == 0.97
    assert spread([]) == {"n": 0}


def test_another_mode_can_be_the_reference() -> None:
    phases = _phases(("memory", 2.0), ("on", 1.805), ("off", 5.0), ("memory", 1.8), ("on", 1.71))
    assert paired_ratios(phases, "on", "memory") == pytest.approx([0.95, 0.95])


def test_the_summary_isolates_revision_from_adaptive_scoring() -> None:
    import argparse

    from bench.bench_memory_overhead import summary

    rows = [("off", 1.0), ("memory", 1.1), ("on", 1.045), ("off", 1.0), ("memory", 1.1)]
    phases = [
        {"mode": m, "groups_per_s": r, "groups": int(r * 100), "seconds": 100.0} for m, r in rows
    ]
    report = summary(phases, [m for m, _ in rows], argparse.Namespace())
    assert report["paired"]["on_vs_memory"]["median"] == 0.95
    assert report["paired"]["on"]["median"] == 1.045
