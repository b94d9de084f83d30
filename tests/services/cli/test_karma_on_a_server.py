"""``plaudit karma train --server URL`` against a real KARMA server over TCP (uvicorn in a
subprocess, embedded set-up, API keys on): the job runs there, the command follows it, and the
model it stored serves ``/v1/karma/score``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from services.cli.main import app
from tests.services.karma.conftest import KEYS, needs_shared
from tests.services.karma.slice import write_slice
from tests.serving import free_port

pytestmark = [pytest.mark.slow, needs_shared]
runner = CliRunner()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("karma-cli")
    sliced = write_slice(root / "reddit_karma", {"train": 16, "dev": 4, "test": 8})
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLAUDIT_")}
    env.update(
        OMP_NUM_THREADS="1",
        PLAUDIT_DATA_DIR=str(root / "data"),
        PLAUDIT_KARMA_DATA_DIR=str(sliced),
        PLAUDIT_API_KEYS=json.dumps(KEYS),
    )
    port = free_port()
    argv = [sys.executable, "-m", "uvicorn", "--factory", "services.karma.app:create_app"]
    log_path = root / "serve.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [*argv, "--host", "127.0.0.1", "--port", str(port)],
            cwd=root,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        while not _ready(url, proc, log_path):
            time.sleep(0.25)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _ready(url: str, proc: subprocess.Popen[bytes], log_path: Path) -> bool:
    if proc.poll() is not None:
        pytest.fail(f"the KARMA server exited:\n{log_path.read_text()}")
    try:
        return httpx.get(f"{url}/health/ready", timeout=2.0).status_code == 200
    except httpx.TransportError:
        return False


TINY_ARGS = [
    "--method",
    "finetune",
    "--max-train-pairs",
    "16",
    "--max-length",
    "64",
    "--batch-size",
    "8",
]
TINY_ARGS += ["--eval-max-pairs", "8", "--spearman-threads", "2", "--threads", "1"]


def test_train_on_the_server_follows_the_job_and_the_model_serves(server: str) -> None:
    trained = runner.invoke(
        app, ["karma", "train", "--server", server, "--api-key", "root-key", *TINY_ARGS]
    )
    assert trained.exit_code == 0, trained.output
    result = json.loads(trained.stdout)
    assert result["model"] == {"name": "karma", "version": 1, "serving": True}
    assert result["evaluation"]["pairs"] == 8 and result["training"]["sibling_pairs"] == 16
    lines = trained.stderr.splitlines()
    assert lines[0].startswith("job ") and lines[0].endswith(f"started on {server}")
    # progress is polled: a stage as short as this tiny run's training may fall between two
    # polls, so the test asks for progress lines and the final one, not for every stage
    progress = [line for line in lines if ": " in line and " elapsed" in line]
    assert progress and progress[-1].startswith("saving: 2/2"), lines
    assert "stored as karma@1 (serving)" in trained.stderr
    assert "pair accuracy" in trained.stderr and "longer reply wins" in trained.stderr
    scored = httpx.post(
        f"{server}/v1/karma/score",
        json={"context": "Any advice for finals?", "replies": ["Sleep well.", "no"]},
        headers={"Authorization": "Bearer trainer-key"},
    )
    assert scored.status_code == 200, scored.text
    assert scored.json()["model"]["version"] == 1 and len(scored.json()["scores"]) == 2


def test_refusals_end_the_command_with_the_servers_message(server: str) -> None:
    forbidden = runner.invoke(
        app, ["karma", "train", "--server", server, "--api-key", "trainer-key", *TINY_ARGS]
    )
    assert forbidden.exit_code == 2 and "admin" in forbidden.stderr
    missing = runner.invoke(
        app,
        ["karma", "train", "--server", server, "--api-key", "root-key", "--data", "no.jsonl"],
    )
    assert missing.exit_code == 2 and "no file or folder 'no.jsonl'" in missing.stderr
