"""``plaudit simulator evaluate`` on a USS-format file the calibration never saw (a plain
JSONL without splits: held out by id hash), with the real SmolLM2 and MiniLM."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from services.cli.main import app

runner = CliRunner()
pytestmark = pytest.mark.slow

TURNS = [
    ("system", "Hello, what can I do for you?"),
    ("user", "I want to return a pair of shoes I bought last week."),
    ("system", "Sure. Do you have the receipt?"),
    ("user", "Yes, I do. Can I get the money back on my card?"),
    ("system", "Yes, the refund goes to the card you paid with."),
    ("user", "Great, thanks, bye."),
]


def write_file(path: Path, dialogues: int) -> None:
    rows = []
    for k in range(dialogues):
        turns = [
            {
                "role": role,
                "text": text,
                "satisfaction": [3 + (k % 2), 3, 4] if role == "user" else None,
            }
            for role, text in TURNS
        ]
        rows.append({"id": f"shop-{k}", "domain": "shop", "turns": turns})
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def test_evaluate_measures_any_uss_file(
    tmp_path: Path, model_cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_file(tmp_path / "shop.jsonl", 60)
    monkeypatch.setenv("PLAUDIT_SIMULATOR_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("PLAUDIT_MODEL_CACHE_DIR", str(model_cache_dir))
    monkeypatch.setenv("PLAUDIT_DATA_DIR", str(tmp_path / "data"))
    out = tmp_path / "report.json"
    result = runner.invoke(
        app,
        [
            "simulator",
            "evaluate",
            "--data",
            "shop.jsonl",
            "--per-domain",
            "10",
            "--threads",
            "1",
            "--dialogues",
            "2",
            "--max-turns",
            "2",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert "after" not in report and report["contexts"] == 10
    shop = report["before"]["domains"]["shop"]
    assert shop["turns"] == 10 and shop["question_rate"]["real"] == pytest.approx(
        sum("?" in t for r, t in TURNS if r == "user") / 3, abs=0.35
    )
    assert shop["satisfaction"]["rated"] > 0 and shop["satisfaction"]["majority_level"] in (3, 4)
    assert "before shop  classifier" in result.output
    whole = report["dialogues_before"]["domains"]["shop"]
    assert whole["real"]["dialogues"] == whole["simulated"]["dialogues"] == 2
    assert whole["real"]["mean_user_turns"] == 2 and whole["real"]["ended"] == 0  # 3 turns, cut
    assert "before shop  dialogues 2" in result.output


def test_evaluate_refuses_files_outside_its_folders(tmp_path: Path) -> None:
    result = runner.invoke(app, ["simulator", "evaluate", "--data", "/etc/hostname"])
    assert result.exit_code == 2 and "neither sgd" in result.output
