"""Unknown PLAUDIT_ variables are warned about at start, with the closest known name (issue 21)."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from services.core.settings_check import known_variables, unknown_variables
from services.core.web.auth import check_startup
from services.settings import Settings

ROOT = Path(__file__).resolve().parents[3]


def test_a_renamed_protocol_variable_names_its_new_name() -> None:
    found = unknown_variables({"PLAUDIT_PROTOCOL_GROUP_SIZE": "8", "HOME": "/root"}, Settings)
    assert found == {"PLAUDIT_PROTOCOL_GROUP_SIZE": "PLAUDIT_PROTOCOLS_GROUP_SIZE"}


def test_a_misspelt_variable_names_the_closest_setting() -> None:
    found = unknown_variables({"PLAUDIT_JUDGE_BASEURL": "x", "PLAUDIT_ZZZ_QQQ": "1"}, Settings)
    assert found == {"PLAUDIT_JUDGE_BASEURL": "PLAUDIT_JUDGE_BASE_URL", "PLAUDIT_ZZZ_QQQ": None}


def test_known_client_and_test_variables_are_quiet() -> None:
    environ = {
        "PLAUDIT_JUDGE_BASE_URL": "x",
        "PLAUDIT_API_KEYS": "{}",
        "PLAUDIT_API_KEY": "k",
        "PLAUDIT_URL": "http://127.0.0.1:8000",
        "PLAUDIT_TEST_REDIS_URL": "redis://",
        "PLAUDIT_DATASETS_DIR": "/tmp",
    }
    assert unknown_variables(environ, Settings) == {}


def test_every_variable_the_client_and_commands_read_is_known() -> None:
    """So the warning never fires for a variable that something does read."""
    read = set()
    for folder in ("trainer_client", "trainer", "offline", "services"):
        for path in (ROOT / folder).rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            read |= set(
                re.findall(r"(?:environ\.get\(|getenv\(|envvar=)\"(PLAUDIT_[A-Z_]+)\"", text)
            )
    assert read and read <= known_variables(Settings), read - known_variables(Settings)


def test_the_start_of_a_server_logs_the_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("PLAUDIT_PROTOCOL_GROUP_SIZE", "8")
    with caplog.at_level(logging.WARNING, logger="plaudit.settings"):
        check_startup(Settings())
    assert (
        "PLAUDIT_PROTOCOL_GROUP_SIZE is not a Plaudit setting and is ignored; did you mean "
        "PLAUDIT_PROTOCOLS_GROUP_SIZE?" in caplog.text
    )
