"""Every command's --help at 80 columns: nothing cut, brackets shown (issue 21: rich help cut
names and defaults with '…', and read 'plaudit[wiki]' as markup, printing 'plaudit')."""

from __future__ import annotations

from typing import Any

import typer.main
from typer.testing import CliRunner

from services.cli.main import app


def _paths(command: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    if not hasattr(command, "list_commands"):
        return [prefix]
    ctx = command.context_class(command)
    subs = [_paths(command.get_command(ctx, n), (*prefix, n)) for n in command.list_commands(ctx)]
    return [prefix, *(p for sub in subs for p in sub)]


def test_help_fits_80_columns_without_cutting() -> None:
    runner = CliRunner()
    paths = _paths(typer.main.get_command(app))
    assert ("rubrics", "synthesize") in paths and ("data", "fetch") in paths
    for path in paths:
        result = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "80"}, terminal_width=80)
        assert result.exit_code == 0, (path, result.output)
        assert "…" not in result.output, path
        assert max(map(len, result.output.splitlines())) <= 80, path


def test_the_wiki_extra_is_named_in_full() -> None:
    result = CliRunner().invoke(app, ["rubrics", "synthesize", "--help"], env={"COLUMNS": "80"})
    assert "plaudit[wiki]" in result.output and "plaudit data fetch wikipedia" in result.output
