"""``plaudit jobs`` and ``plaudit eval judge --server`` against a real ``plaudit serve judge``
over TCP (embedded set-up, real SmolLM2 judge, API keys on)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from click.testing import Result
from typer.testing import CliRunner

from services.cli.main import app
from tests.services.core.jobs.conftest import KEYS
from tests.services.core.jobs.test_evaluation_job import DEV, needs_data
from tests.serving import serving

pytestmark = pytest.mark.slow
runner = CliRunner()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, model_cache_dir: Path) -> Iterator[str]:
    root = tmp_path_factory.mktemp("cli-server")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLAUDIT_")}
    env.update(
        OMP_NUM_THREADS="1",
        PLAUDIT_DATA_DIR=str(root / "data"),
        PLAUDIT_MODEL_CACHE_DIR=str(model_cache_dir),
        PLAUDIT_API_KEYS=json.dumps(KEYS),
        PLAUDIT_JOBS_HEARTBEAT_S="0.2",
        PLAUDIT_JOBS_LEASE_S="5",
    )
    with serving("judge", root, env, within=600) as url:
        yield url


def _probe(server: str, key: str, steps: int, delay_s: float) -> str:
    response = httpx.post(
        f"{server}/v1/jobs/probe",
        json={"steps": steps, "delay_s": delay_s},
        headers={"Authorization": f"Bearer {key}"},
    )
    assert response.status_code == 202, response.text
    return str(response.json()["id"])


def _jobs(*args: str, key: str = "alice-key") -> Result:
    return runner.invoke(app, ["jobs", *args, "--api-key", key])


def test_jobs_wait_show_list_and_cancel(server: str) -> None:
    job_id = _probe(server, "alice-key", 6, 0.2)
    waited = _jobs("wait", job_id, "--server", server, "--every", "0", "--interval", "0.1")
    assert waited.exit_code == 0, waited.output
    assert json.loads(waited.stdout)["steps"] == 6, "the result goes to stdout"
    lines = waited.stderr.splitlines()
    assert any(line.startswith("probing: ") and "/6," in line for line in lines)
    assert f"{job_id}  jobs.probe" in lines[-1] and "succeeded" in lines[-1]

    shown = _jobs("show", job_id, "--server", server)
    assert shown.exit_code == 0 and json.loads(shown.stdout)["result"]["steps"] == 6
    listed = _jobs("list", "--server", server, "--json")
    assert job_id in [j["id"] for j in json.loads(listed.stdout)["items"]]
    hidden = _jobs("show", job_id, "--server", server, key="bob-key")
    assert hidden.exit_code == 2 and "no job" in hidden.stderr

    long_id = _probe(server, "alice-key", 500, 0.1)
    cancelled = _jobs("cancel", long_id, "--server", server)
    assert cancelled.exit_code == 0, cancelled.output
    assert long_id in cancelled.stdout
    after = _jobs("wait", long_id, "--server", server, "--interval", "0.1")
    assert after.exit_code == 1 and "cancelled" in after.stderr


@needs_data
def test_eval_judge_runs_on_the_server_and_prints_the_report(server: str, tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    args = ["eval", "judge", "--server", server, "--api-key", "alice-key", "--data", str(DEV)]
    args += ["--limit", "2", "--non-tie-only", "--max-chars", "300", "--out", str(out)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "GPT-4 (data)" in result.stdout and "longer answer" in result.stdout
    assert "started on" in result.stderr and "judging votes: 2/2," in result.stderr
    report = json.loads(out.read_text())
    assert report["overall"]["votes"] == 2 and report["overall"]["failed"] == 0
    assert report["config"]["data"] == "inline:dev.jsonl"
    assert report["config"]["limit"] == 2 and report["config"]["non_tie_only"] is True
    refused = runner.invoke(app, [*args, "--backend", "openai"])
    assert refused.exit_code == 2 and "a server uses its own" in refused.stderr
