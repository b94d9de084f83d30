"""``plaudit train`` wiring, prompt loading, the step log line and failure counting (no model)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from services.cli import train as train_cli
from services.cli.main import app
from tests.serving import free_port
from trainer import DEFAULT_PROMPTS, DEFAULT_SPEC, TrainConfig, load_prompts
from trainer.callbacks import format_step_line
from trainer.config import default_train_root
from trainer.data import PromptFileError, as_rows, load_rows
from trainer.metering import MeteredReward

runner = CliRunner()


def _flat(output: str) -> str:
    """CLI output without rich's error box and line wrapping."""
    return " ".join(output.replace("│", " ").split())


def test_prompts_from_jsonl_text_or_defaults(tmp_path: Path) -> None:
    jsonl = tmp_path / "p.jsonl"
    jsonl.write_text('{"prompt": "Name a prime."}\n\n{"prompt": "Say hi.", "id": 2}\n')
    text = tmp_path / "p.txt"
    text.write_text("  first prompt \n\nsecond prompt\n")
    assert load_prompts(jsonl) == ["Name a prime.", "Say hi."]
    assert load_prompts(text) == ["first prompt", "second prompt"]
    assert load_prompts(None) == list(DEFAULT_PROMPTS)
    assert load_rows(jsonl) == [
        {"prompt": "Name a prime.", "id": None},
        {"prompt": "Say hi.", "id": 2},
    ]
    exported = tmp_path / "export.jsonl"
    exported.write_text('{"prompt": "Q?", "rubric_id": "rb_ab@1"}\n')
    [row] = as_rows(load_rows(exported), chat=True)
    assert row == {"prompt": [{"role": "user", "content": "Q?"}], "rubric_id": "rb_ab@1"}


@pytest.mark.parametrize(
    ("content", "message"),
    [("", "no prompts"), ("{oops\n", ":1: not JSON"), ('{"text": "x"}\n', ":1: expected")],
)
def test_bad_prompt_files_say_where(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(PromptFileError, match=message):
        load_prompts(path)


def test_rows_are_chat_messages_for_a_chat_model() -> None:
    assert as_rows(["hi"], chat=True) == [{"prompt": [{"role": "user", "content": "hi"}]}]
    assert as_rows(["hi"], chat=False) == [{"prompt": "hi"}]


def test_config_refuses_advantages_and_typos() -> None:
    with pytest.raises(ValidationError, match="GRPO normalizes"):
        TrainConfig(spec={"channels": {"diversity": {}}, "advantage": "grpo"})
    with pytest.raises(ValidationError, match="channels"):
        TrainConfig(spec={"channels": {}})
    with pytest.raises(ValidationError, match="extra"):
        TrainConfig(stpes=3)  # type: ignore[call-arg]
    config = TrainConfig(num_generations=8, groups_per_step=2)
    assert config.batch_size == 16 and config.spec == DEFAULT_SPEC
    assert config.resolved_output_dir == default_train_root() / config.run_id
    assert Path.cwd() not in config.resolved_output_dir.parents


def test_cli_options_reach_the_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[TrainConfig] = []
    monkeypatch.setattr(train_cli, "_run", seen.append)
    prompts = tmp_path / "p.txt"
    prompts.write_text("one\ntwo\n")
    spec_file = tmp_path / "spec.json"
    spec = {"channels": {"diversity": {"weight": 0.5}}}
    spec_file.write_text(json.dumps(spec))
    args = ["train", "--server", "http://10.0.0.5:9000", "--prompts", str(prompts)]
    args += ["--steps", "3", "--spec", f"@{spec_file}", "--model", "/models/policy"]
    args += ["--out", str(tmp_path / "out"), "-g", "8", "--lr", "0.001", "--threads", "1"]
    args += ["--run-id", "r-1", "--no-save"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    [config] = seen
    assert (config.server_url, config.prompts, config.steps) == ("http://10.0.0.5:9000", prompts, 3)
    assert (config.spec, config.model, config.output_dir) == (
        spec,
        "/models/policy",
        tmp_path / "out",
    )
    assert (config.num_generations, config.learning_rate, config.threads) == (8, 0.001, 1)
    assert (config.run_id, config.save_model) == ("r-1", False)


def test_cli_defaults_train_against_make_serve(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[TrainConfig] = []
    monkeypatch.setattr(train_cli, "_run", seen.append)
    assert runner.invoke(app, ["train"]).exit_code == 0
    [config] = seen
    assert config.server_url == "http://127.0.0.1:8000" and config.spec == DEFAULT_SPEC
    assert (config.model, config.prompts, config.num_generations) == (None, None, 4)


@pytest.mark.parametrize(
    ("spec", "message"),
    [("{nope", "not JSON"), ("[1]", "JSON object"), ('{"channels": {}}', "channels")],
)
def test_cli_rejects_bad_specs(spec: str, message: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(train_cli, "_run", lambda config: None)
    result = runner.invoke(app, ["train", "--spec", spec])
    assert result.exit_code == 2 and message in _flat(result.output), result.output


def test_cli_checks_the_prompts_before_anything_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # short paths: rich would fold a long one inside its box
    Path("one.txt").write_text("only one\n")
    result = runner.invoke(app, ["train", "--prompts", "one.txt", "--groups-per-step", "2"])
    assert result.exit_code == 2, result.output
    assert "one.txt: 1 prompt(s), but one step takes 2 groups" in _flat(result.output)
    Path("bad.jsonl").write_text("{oops\n")
    result = runner.invoke(app, ["train", "--prompts", "bad.jsonl"])
    assert result.exit_code == 2 and "bad.jsonl:1: not JSON" in _flat(result.output)


def test_cli_says_when_no_server_answers() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    result = runner.invoke(app, ["train", "--server", url, "--steps", "1"])
    assert result.exit_code == 1, result.output
    output = _flat(result.output)
    assert f"no Plaudit server at {url}" in output and "plaudit serve" in output


def test_plaudit_help_stays_light() -> None:
    code = (
        "import sys, services.cli.main\n"
        "heavy = [m for m in ('torch', 'trl', 'transformers', 'datasets') if m in sys.modules]\n"
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    result = runner.invoke(app, ["train", "--help"])
    assert result.exit_code == 0 and "--prompts" in result.output and "--spec" in result.output


def test_step_line_shows_reward_failures_channels_and_consistency() -> None:
    logs = {
        "reward": 2.5,
        "reward_std": 0.5,
        "plaudit/failed": 1.0,
        "plaudit/scored": 7.0,
        "plaudit/channels/diversity": 0.4,
        "plaudit/judge_pairwise/inconsistency_rate": 0.25,
        "loss": 0.01,
        "step_time": 3.21,
    }
    line = format_step_line(3, 10, logs)
    assert line == (
        "step 3/10  reward 2.500 ± 0.500  failed 1/8  diversity 0.400  "
        "inconsistency rate 0.250  loss 0.010  3.2s"
    )
    assert format_step_line(1, 1, {"reward": None}) == "step 1/1  reward n/a ± n/a"


def test_metered_reward_counts_nones_and_keeps_the_name() -> None:
    metrics: list[tuple[str, float]] = []

    def plaudit(prompts: list[Any], completions: list[Any], **_: Any) -> list[float | None]:
        return [1.0, None, 0.5][: len(completions)]

    reward = MeteredReward(plaudit, keep_calls=True)
    out = reward(["p"] * 3, ["a", "b", "c"], log_metric=lambda k, v: metrics.append((k, v)))
    assert out == [1.0, None, 0.5] and reward.__name__ == "plaudit"
    assert (reward.failed, reward.scored) == (1, 2)
    assert metrics == [("plaudit/failed", 1.0), ("plaudit/scored", 2.0)]
    assert reward.calls[0].completions == ["a", "b", "c"]
