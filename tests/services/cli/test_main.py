"""The plaudit command, the packaging promises, and docker-compose against the real CLI."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import typer.main
import yaml
from pydantic import BaseModel
from typer.testing import CliRunner

import services
from services.cli.main import APPS, app
from services.settings import Settings

ROOT = Path(__file__).resolve().parents[3]
runner = CliRunner()


def test_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output.strip() == f"plaudit {services.__version__}"


def test_serve_refuses_a_public_bind_without_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PLAUDIT_API_KEYS", raising=False)
    result = runner.invoke(app, ["serve", "all", "--host", "0.0.0.0", "--port", "8123"])
    assert result.exit_code == 2
    assert "without API keys" in result.output and "PLAUDIT_API_KEYS" in result.output


def test_serve_rejects_an_unknown_service() -> None:
    result = runner.invoke(app, ["serve", "judgey"])
    assert result.exit_code == 2
    assert "unknown service" in result.output


def test_karma_train_refuses_an_option_its_method_does_not_read() -> None:
    """Issue 24: frozen is the default method; --epochs (a fine-tuning option) is refused, not
    ignored, before any data is read."""
    result = runner.invoke(app, ["karma", "train", "--epochs", "3", "--no-store"])
    assert result.exit_code == 2
    assert "read only by method 'finetune'" in " ".join(result.output.split())


def test_db_upgrade_and_downgrade_commands(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLAUDIT_DATA_DIR", str(tmp_path / "d"))
    up = runner.invoke(app, ["db", "upgrade"])
    assert up.exit_code == 0, up.output
    assert (tmp_path / "d" / "plaudit.db").exists()
    down = runner.invoke(app, ["db", "downgrade", "base"])
    assert down.exit_code == 0, down.output


def test_worker_needs_redis(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PLAUDIT_REDIS_URL", raising=False)
    result = runner.invoke(app, ["worker"])
    assert result.exit_code == 2 and "PLAUDIT_REDIS_URL" in result.output


def test_client_install_stays_light() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    base = " ".join(project["dependencies"]).lower()
    for heavy in ("torch", "fastapi", "sqlalchemy", "sentence-transformers", "numpy"):
        assert heavy not in base
    code = (
        "import sys, trainer_client, services.cli.main; "
        "print(sorted({'torch', 'fastapi', 'numpy'} & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def _compose() -> dict:  # type: ignore[type-arg]
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def _plaudit_services() -> dict[str, dict]:  # type: ignore[type-arg]
    return {
        name: spec
        for name, spec in _compose()["services"].items()
        if spec.get("image", "").startswith("plaudit")
    }


def test_compose_commands_are_real_cli_commands() -> None:
    served = set()
    for name, spec in _plaudit_services().items():
        argv = spec["command"]
        assert argv[0] == "plaudit", name
        _parse(typer.main.get_command(app), list(argv[1:]))
        if argv[1] == "serve":
            assert argv[2] in APPS, f"{name}: unknown service {argv[2]}"
            served.add(argv[2])
            assert "/health/ready" in " ".join(spec["healthcheck"]["test"]), name
    # Issue 21: the gateway serves every service; one container per service only loaded models.
    assert served == {"all"} and "all" in APPS
    for broken in (["serve", "all", "--no-such-flag"], ["db", "upgrad"], ["serve", "--port", "x"]):
        with pytest.raises(Exception) as info:
            _parse(typer.main.get_command(app), broken)
        assert not isinstance(info.value, AssertionError) or "no such command" in str(info.value)
    assert {"postgres", "redis", "migrate"} <= set(_compose()["services"])


def _parse(command: Any, args: list[str]) -> None:
    """Walk sub-commands and parse the leaf's options exactly as the CLI would (no run).

    Typer ships its own copy of click, so groups are recognised by shape, not by class.
    """
    while hasattr(command, "list_commands"):
        sub = command.get_command(command.context_class(command), args[0])
        assert sub is not None, f"no such command: {args[0]}"
        command, args = sub, args[1:]
    command.make_context(command.name or "", list(args))


def test_compose_environment_names_real_settings() -> None:
    fields = set()
    for name, field in Settings.model_fields.items():
        section = field.annotation
        if isinstance(section, type) and issubclass(section, BaseModel):
            fields |= {f"PLAUDIT_{name}_{sub}".upper() for sub in section.model_fields}
        else:
            fields.add(f"PLAUDIT_{name.upper()}")
    env_example = [
        line.split("=", 1)[0]
        for line in (ROOT / "compose.env.example").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    assert set(env_example) <= fields, set(env_example) - fields
    for name, spec in _compose()["services"].items():
        if not spec.get("image", "").startswith("plaudit"):
            continue
        assert spec["env_file"] == "compose.env", name
        assert set(spec.get("environment", {})) <= fields, name
    for required in ("PLAUDIT_API_KEYS", "PLAUDIT_DATABASE_URL", "PLAUDIT_REDIS_URL"):
        assert required in env_example
    settings = Settings(_env_file=str(ROOT / "compose.env.example"))  # type: ignore[call-arg]
    assert settings.api_keys and settings.redis_url and settings.database_url


def test_ci_fails_instead_of_skipping_when_redis_is_down() -> None:
    env = {**os.environ, "CI": "true", "PLAUDIT_TEST_REDIS_URL": "redis://127.0.0.1:1/0"}
    any_test = "tests/services/diversity/test_diversity_metrics.py::test_distinct_n_hand_computed"
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", any_test],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode != 0
    assert "unreachable" in result.stdout + result.stderr


def _install_commands(*overrides: str) -> list[str]:
    """What ``make install`` would run on a machine without a virtualenv (dry run)."""
    out = subprocess.run(
        ["make", "-n", "-B", "install", "VENV=/nonexistent/venv", *overrides],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return [line for line in out.stdout.splitlines() if "pip install" in line]


def test_make_install_takes_torch_from_the_cpu_index_first() -> None:
    commands = _install_commands()
    torch = [c for c in commands if "torch==" in c]
    assert torch and commands.index(torch[0]) < commands.index(
        next(c for c in commands if "-e '.[" in c)
    ), "torch is pinned before the extras that depend on it"
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in torch[0]
    cuda = _install_commands("TORCH_INDEX=https://download.pytorch.org/whl/cu128")
    assert any("--extra-index-url https://download.pytorch.org/whl/cu128" in c for c in cuda)
