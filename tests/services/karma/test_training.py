"""A tiny real training run: the bundled MiniLM, TRL's RewardTrainer, a few steps on a few dozen
pairs; the saved directory loads, scores, and scores differently from the untrained model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from plaudit_wire.karma import KarmaTrainConfig
from services.cli.main import app
from services.core.errors import InvalidInput
from services.karma.model import KarmaModel
from services.karma.training import TrainResult, _load_base, train_karma

pytestmark = pytest.mark.slow

TOPICS = ["majors", "dorms", "finals", "internships", "office hours", "roommates"]
TOPICS += ["scholarships", "transfers", "labs", "advisors", "clubs", "grad school"]
SAMPLES = [("How do I survive finals?", "Sleep, then practice exams."), ("Any tips?", "lol")]


def _rows() -> list[dict[str, Any]]:
    rows = []
    for i, topic in enumerate(TOPICS):
        split = "train" if i < 8 else ("dev" if i < 10 else "test")
        context = f"Any advice about {topic} for a first-year student?"
        replies = [
            (f"Start early with {topic}: ask someone a year ahead what they wish they knew.", 40),
            (f"It depends on your school, but {topic} gets easier after the first month.", 12),
            ("Just wing it.", 3),
            ("lol", 1),
        ]
        for reply, score in replies:
            rows.append(
                {
                    "context": context,
                    "reply": reply,
                    "score": score,
                    "thread_id": f"t{i}",
                    "split": split,
                    "metadata": {"subreddit": "College", "depth": 0},
                }
            )
    return rows


@pytest.fixture(scope="module")
def data_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("karma-data") / "scored.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in _rows()))
    return path


def _config(data_file: Path, out: Path) -> KarmaTrainConfig:
    return KarmaTrainConfig(
        method="finetune",
        data=str(data_file),
        output_dir=out,
        max_train_pairs=32,
        batch_size=8,
        max_length=64,
        learning_rate=1e-4,
        threads=2,
        spearman_threads=5,
        variant="with_metadata",
    )


@pytest.fixture(scope="module")
def trained(
    data_file: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[TrainResult, list[Any]]:
    out = tmp_path_factory.mktemp("karma-models") / "tiny"
    events: list[Any] = []
    result = train_karma(
        _config(data_file, out),
        data_dir=out.parent,
        models_dir=out.parent,
        progress=lambda done, total, stage: events.append((done, total, stage)),
    )
    return result, events


def test_training_writes_a_model_directory_with_its_metrics(
    trained: tuple[TrainResult, list[Any]],
) -> None:
    result, events = trained
    names = {p.name for p in result.path.iterdir()}
    assert {
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "karma.json",
        "metrics.json",
    } <= names
    assert not [p for p in result.path.parent.iterdir() if p.name.endswith(".partial")]
    metrics = json.loads((result.path / "metrics.json").read_text())
    assert metrics["variant"] == "with_metadata"
    assert metrics["training"]["steps"] == 4 and metrics["training"]["sibling_pairs"] == 32
    assert metrics["training"]["pairs_dropped_by_trl"] == 0
    assert metrics["params"]["learning_rate"] == 1e-4
    evaluation = metrics["evaluation"]
    assert evaluation["pairs"] == 12  # two test threads, six pairs each
    assert 0.0 <= evaluation["pair_accuracy"] <= 1.0
    assert evaluation["baselines"]["length"]["pair_accuracy"] == 1.0  # longer won every time
    assert evaluation["spearman"]["threads"] == 2
    stages = [stage for _, _, stage in events]
    assert stages[0] == "load" and stages[-1] == "save"
    assert (4, 4, "train") in events
    assert ("evaluate" in stages) and stages.index("train") < stages.index("evaluate")


def test_the_trained_model_loads_and_scores_differently_from_the_untrained_one(
    trained: tuple[TrainResult, list[Any]], data_file: Path, tmp_path: Path
) -> None:
    result, _ = trained
    model = KarmaModel.load(result.path)
    assert model.variant == "with_metadata"
    after = model.score_batch(SAMPLES)
    assert model.score_batch(list(reversed(SAMPLES))) == pytest.approx(list(reversed(after)))
    base, tokenizer = _load_base(_config(data_file, tmp_path / "unused"))
    before = KarmaModel(base, tokenizer, model.card).score_batch(SAMPLES)
    assert max(abs(a - b) for a, b in zip(after, before, strict=True)) > 1e-3
    assert model.score("Any tips?", ["a", "b", "c"]) == pytest.approx(
        model.score_batch([("Any tips?", r) for r in "abc"])
    )
    assert model.metrics()["evaluation"]["pairs"] == 12


def test_karma_eval_command_reports_beside_the_baselines(
    trained: tuple[TrainResult, list[Any]], data_file: Path, tmp_path: Path
) -> None:
    result, _ = trained
    out = tmp_path / "eval.json"
    run = CliRunner().invoke(
        app,
        [
            "karma",
            "eval",
            "--model",
            str(result.path),
            "--pairs",
            str(data_file),
            "--split",
            "dev",
            "--out",
            str(out),
        ],
    )
    assert run.exit_code == 0, run.output
    assert "longer reply wins 100.0%" in run.output
    assert json.loads(out.read_text())["pairs"] == 12


def test_karma_train_refuses_bad_data_and_an_existing_output(
    data_file: Path, tmp_path: Path
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"context": "c", "reply": "r", "thread_id": "t"}\n')
    run = CliRunner().invoke(
        app, ["karma", "train", "--data", str(bad), "--out", str(tmp_path / "m")]
    )
    assert run.exit_code == 2
    assert "line 1: field 'score': Field required" in run.output
    taken = tmp_path / "taken"
    taken.mkdir()
    with pytest.raises(InvalidInput, match="exists"):
        train_karma(_config(data_file, taken), data_dir=tmp_path, models_dir=tmp_path)


class _Died(Exception):
    """Stands for the death of the process running the training."""


def test_an_interrupted_finetune_resumes_from_its_last_checkpoint(
    data_file: Path, tmp_path: Path
) -> None:
    """The trainer keeps a checkpoint every ``checkpoint_steps`` steps in ``checkpoint_dir``;
    a run given that folder again carries on from it (a retried karma.train job, issue 23)."""
    checkpoints = tmp_path / "trainer"
    config = _config(data_file, tmp_path / "model").model_copy(
        update={"checkpoint_dir": checkpoints, "checkpoint_steps": 2}
    )

    def dies_at_step_3(done: int, total: int, stage: str) -> None:
        if stage == "train" and done == 3:
            raise _Died

    with pytest.raises(_Died):
        train_karma(config, data_dir=tmp_path, models_dir=tmp_path, progress=dies_at_step_3)
    assert sorted(p.name for p in checkpoints.glob("checkpoint-*")) == ["checkpoint-2"]
    steps: list[int] = []

    def record(done: int, total: int, stage: str) -> None:
        if stage == "train":
            steps.append(done)

    result = train_karma(config, data_dir=tmp_path, models_dir=tmp_path, progress=record)
    training = result.metrics["training"]
    assert training["resumed_from_step"] == 2 and training["steps"] == 4
    assert steps == [3, 4]  # steps 1 and 2 are not trained again
    assert (result.path / "metrics.json").is_file()
