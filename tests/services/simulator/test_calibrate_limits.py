"""``--max-length`` below what the simulator's instructions take is refused at once (issue 21: 64
was allowed by the help, then the job failed after converting the model: 'no user turn fits')."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from plaudit_wire.simulator import MIN_MAX_LENGTH, CalibrationConfig
from services.cli.main import app


def test_the_command_refuses_a_max_length_too_short_for_the_prompt() -> None:
    result = CliRunner().invoke(app, ["simulator", "calibrate", "--max-length", "64"])
    assert result.exit_code == 2
    assert "--max-length" in result.output and "128" in result.output


def test_the_config_and_the_job_body_refuse_it_too() -> None:
    with pytest.raises(ValidationError, match="greater than or equal to 128"):
        CalibrationConfig(max_length=64)
    assert CalibrationConfig(max_length=MIN_MAX_LENGTH).max_length == 128
