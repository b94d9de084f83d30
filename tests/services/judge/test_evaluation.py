"""The MT-Bench evaluation: sampling, statistics, and the real command on a tiny sample."""

from __future__ import annotations

import io
import json
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from services.cli.main import app
from services.cli.progress import ProgressDisplay
from services.judge import evaluation as ev
from tests.shared_data import reason, shared_copy

DATA = shared_copy("mtbench_human", "dev.jsonl") or Path("missing")
DEV = DATA / "dev.jsonl"
needs_data = pytest.mark.skipif(not DEV.exists(), reason=reason("mtbench_human"))


def _vote(i: int, category: str, human: str, gpt4: str = "a") -> ev.Vote:
    return ev.Vote(f"v{i}", category, 1, "q", "short", "a longer answer", human, gpt4)


def test_stratified_sample_is_proportional_seeded_and_non_tie_when_asked() -> None:
    votes = [
        _vote(i, "math" if i < 60 else "coding", "tie" if i % 5 == 0 else "b") for i in range(100)
    ]
    sample = ev.stratified_sample(votes, 20, seed=3, non_tie_only=True)
    assert len(sample) == 20 and all(v.human != "tie" for v in sample)
    assert Counter(v.category for v in sample) == {"math": 12, "coding": 8}
    assert sample == ev.stratified_sample(votes, 20, seed=3, non_tie_only=True)
    assert sample != ev.stratified_sample(votes, 20, seed=4, non_tie_only=True)


def test_wilson_interval() -> None:
    low, high = ev.wilson(60, 100)
    assert low == pytest.approx(0.502, abs=1e-3) and high == pytest.approx(0.691, abs=1e-3)
    assert ev.wilson(0, 0) == (0.0, 0.0)


def test_summary_counts_agreement_consistency_and_position() -> None:
    outcomes = [
        ev.VoteOutcome(
            _vote(0, "math", "a"), 0.8, "a", True, [0.9, 0.3], "ok", ["ok/structured"] * 2
        ),
        ev.VoteOutcome(
            _vote(1, "math", "b"),
            0.6,
            "tie",
            False,
            [0.9, 0.7],
            "ok",
            ["ok/structured", "ok/scored"],
        ),
        ev.VoteOutcome(_vote(2, "math", "tie"), 0.4, "b", True, [0.2, 0.6]),
        ev.VoteOutcome(_vote(3, "math", "b"), None, None, None, [], "error: down"),
    ]
    s = ev.summarize(outcomes)
    assert s["failed"] == 1
    assert s["agreement_with_ties"]["rate"] == pytest.approx(1 / 3)
    assert s["agreement_without_ties"]["n"] == 1 and s["agreement_without_ties"]["rate"] == 1.0
    assert s["forced_choice_on_human_non_ties"]["rate"] == pytest.approx(0.5)
    assert s["position_consistency"]["rate"] == pytest.approx(2 / 3)
    assert s["first_slot_preference"]["rate"] == pytest.approx(4 / 6)
    assert s["orders_by_source"] == {"ok/structured": 3, "ok/scored": 1}
    refs = ev.references([o.vote for o in outcomes])
    assert refs["longer_answer"]["agreement_on_human_non_ties"]["rate"] == pytest.approx(2 / 3)


@needs_data
@pytest.mark.slow
def test_eval_command_on_the_real_judge(
    tmp_path: Path, model_cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLAUDIT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("PLAUDIT_MODEL_CACHE_DIR", str(model_cache_dir))
    out = tmp_path / "report.json"
    result = CliRunner().invoke(
        app,
        [
            "eval",
            "judge",
            "--data",
            str(DEV),
            "--limit",
            "2",
            "--non-tie-only",
            "--max-chars",
            "300",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "GPT-4 (data)" in result.output and "longer answer" in result.output
    report = json.loads(out.read_text())
    assert report["overall"]["votes"] == 2 and report["overall"]["failed"] == 0
    assert report["config"]["backend"] == "local" and "partial" not in report["config"]
    assert sum(report["overall"]["orders_by_source"].values()) == 4
    assert set(report) >= {"per_category", "references", "single_order"}


def test_progress_prints_lines_when_not_on_a_terminal() -> None:
    stream = io.StringIO()
    display = ProgressDisplay(stream, every_s=0.0, tty=False)
    display.update(4, 10, "judging votes")
    display.update(10, 10, "judging votes")
    display.close()
    lines = stream.getvalue().strip().splitlines()
    assert lines[0].startswith("judging votes: 4/10,") and "s left" in lines[0]
    assert lines[-1].startswith("judging votes: 10/10,") and lines[-1].endswith("~0 s left")


def test_progress_draws_a_bar_on_a_terminal() -> None:
    stream = io.StringIO()
    display = ProgressDisplay(stream, tty=True)
    display.update(0, None, "waiting for the judge")
    display.update(3, 12, "judging votes")
    display.close()
    frames = stream.getvalue().split("\r")[1:]
    assert "0/?" in frames[0]
    assert "[#######-----------------------] 3/12  25%" in frames[1]
    assert stream.getvalue().endswith("\n") and "\n" not in "".join(frames)[:-1]


def test_progress_estimates_what_is_left_from_the_stage_own_pace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A slow first stage (a model load) does not inflate the next stage's estimate."""
    clock = [1000.0]
    monkeypatch.setattr("services.cli.progress.time.monotonic", lambda: clock[0])
    stream = io.StringIO()
    display = ProgressDisplay(stream, every_s=0.0, tty=False)
    display.update(0, 1, "loading the judge")
    clock[0] += 100
    display.update(1, 1, "loading the judge")
    display.update(0, 10, "judging votes")
    clock[0] += 10
    display.update(5, 10, "judging votes")
    line = stream.getvalue().strip().splitlines()[-1]
    assert line == "judging votes: 5/10, 110 s elapsed, ~10 s left", line
