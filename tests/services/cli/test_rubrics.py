"""``plaudit rubrics synthesize`` and ``plaudit rubrics export`` in-process, on the scripted
generator and judge (the command's plumbing: options, the summary, the JSON result, the
dataset file). The real model runs in test_synthesis_real.py; ``--server`` follows a job with
the same code as ``plaudit karma train --server`` (services/cli/jobs_client.py)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from services.app import create_app
from services.cli import rubrics as rubrics_cli
from services.cli.main import app as cli
from services.core.models.embedder import Embedder
from services.settings import Settings
from tests.services.rubrics.synth_docs import DOCS
from tests.services.rubrics.synth_scripted import SynthScriptedBackend


@pytest.fixture
def scripted_services(
    embedded_settings: Settings, embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command's app, on this test's data dir and the scripted backend."""

    @asynccontextmanager
    async def opened() -> AsyncIterator[Any]:
        app = create_app(embedded_settings, embedder=embedder, judge_backend=SynthScriptedBackend())
        async with app.router.lifespan_context(app):
            yield app.state.resources

    monkeypatch.setattr(rubrics_cli, "_services", opened)


def test_synthesize_then_export_from_the_command_line(
    scripted_services: None, tmp_path: Path
) -> None:
    documents = tmp_path / "docs.jsonl"
    documents.write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    runner = CliRunner()
    made = runner.invoke(cli, ["rubrics", "synthesize", "--documents", str(documents)])
    assert made.exit_code == 0, made.output
    result = json.loads(made.stdout)
    assert result["documents"] == len(DOCS) and result["kept"] >= 3
    assert f"kept {result['kept']} of {len(DOCS)} documents" in made.stderr
    assert "filter" in made.stderr and "too_short 1" in made.stderr

    out = tmp_path / "export.jsonl"
    exported = runner.invoke(
        cli, ["rubrics", "export", "--job", result["job_id"], "--format", "trl", "--out", str(out)]
    )
    assert exported.exit_code == 0, exported.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["rubric_id"] for r in rows] == result["rubric_ids"]


def test_text_files_are_split_into_paragraphs(tmp_path: Path) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("First paragraph.\nStill first.\n\n\nSecond one.\n")
    assert rubrics_cli._documents(text) == [
        {"id": "notes:1", "text": "First paragraph.\nStill first."},
        {"id": "notes:2", "text": "Second one."},
    ]


def test_bad_format_is_refused(tmp_path: Path) -> None:
    outcome = CliRunner().invoke(
        cli, ["rubrics", "export", "--job", "x", "--format", "csv", "--out", str(tmp_path / "o")]
    )
    assert outcome.exit_code == 2 and "trl, verl or openrlhf" in outcome.output


def test_exporting_a_job_that_kept_nothing_fails_and_writes_nothing(
    scripted_services: None, tmp_path: Path
) -> None:
    """Issue 21: it wrote a 0-byte file and exited 0."""
    documents = tmp_path / "docs.jsonl"
    documents.write_text(json.dumps({"id": "stub", "text": "Paris is a city. It is large."}))
    runner = CliRunner()
    made = runner.invoke(cli, ["rubrics", "synthesize", "--documents", str(documents)])
    assert made.exit_code == 0, made.output
    result = json.loads(made.stdout)
    assert result["kept"] == 0
    out = tmp_path / "export.jsonl"
    exported = runner.invoke(
        cli, ["rubrics", "export", "--job", result["job_id"], "--out", str(out)]
    )
    assert exported.exit_code == 1, exported.output
    assert f"job {result['job_id']} kept no instances" in exported.output
    assert not out.exists()
