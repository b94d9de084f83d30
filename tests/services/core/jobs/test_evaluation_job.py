"""The MT-Bench evaluation as a server job: the real SmolLM2 judge on both runners (in the
arq case, the judge that ``plaudit worker`` loaded), refusals, and a job whose judge is down."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from plaudit_wire.judge import EvaluationRequest
from services.core.cache import MemoryCache
from services.core.models.cached_judge import CachedJudge
from services.judge import evaluation as ev
from services.judge.jobs import run_evaluation, sampled_votes
from services.judge.service import JudgeService
from tests.conftest import assert_envelope
from tests.services.core.jobs.conftest import Client, Runner, finished, started, wait_until
from tests.services.judge.scripted import ScriptedBackend
from tests.shared_data import reason, shared_copy

pytestmark = pytest.mark.slow

_COPY = shared_copy("mtbench_human", "dev.jsonl")
DEV = _COPY / "dev.jsonl" if _COPY is not None else None
needs_data = pytest.mark.skipif(DEV is None, reason=reason("mtbench_human"))


def _rows() -> list[dict[str, Any]]:
    assert DEV is not None
    return ev.load_rows(DEV)


def _without_time(report: dict[str, Any]) -> dict[str, Any]:
    return {**report, "config": {k: v for k, v in report["config"].items() if k != "seconds"}}


@needs_data
async def test_the_evaluation_job_measures_the_serving_judge(
    runner: Runner, as_key: Client, judge_backend: Any
) -> None:
    votes = [r for r in _rows() if r["human_winner"] != "tie"][:40]
    body = {"votes": votes, "source": "dev.jsonl", "limit": 2, "seed": 2, "max_chars": 200}
    alice = as_key("alice-key")
    response = await alice.post("/v1/judge/evaluations", json=body)
    assert response.status_code == 202, response.text
    assert response.headers["location"] == f"/v1/jobs/{response.json()['id']}"
    job = await wait_until(alice, response.json()["id"], finished, within=600)
    assert job["state"] == "succeeded", job
    assert job["kind"] == "judge.evaluation" and job["progress"]["stage"] == "judging votes"
    assert job["progress"]["done"] == job["progress"]["total"] == 2
    role = "worker" if runner.name == "arq" else "inprocess"
    assert job["worker"].split(":")[2].startswith(role)
    report = job["result"]
    assert report["overall"]["votes"] == 2 and report["overall"]["failed"] == 0
    assert report["config"]["data"] == "inline:dev.jsonl"
    assert report["config"]["backend"] == "local"
    assert report["config"]["model"] == judge_backend.info.model_id
    # The same report as the evaluation run here on the same judge (the CLI's own path).
    request = EvaluationRequest(**body)
    service = JudgeService(runner.settings.judge, CachedJudge(judge_backend, MemoryCache()))
    here = await run_evaluation(
        service,
        request,
        sampled_votes(request, Path.cwd()),
        backend=judge_backend,
        backend_kind="local",
    )
    assert _without_time(report) == _without_time(here)


@pytest.fixture
async def scripted_client(
    embedded_settings: Any, request: pytest.FixtureRequest
) -> AsyncIterator[tuple[httpx.AsyncClient, httpx.AsyncClient]]:
    """(reward key, admin key) clients of an in-process app with the scripted judge."""
    from tests.services.core.jobs.conftest import KEYS

    down = getattr(request, "param", False)
    settings = embedded_settings.model_copy(update={"api_keys": KEYS})
    async with started(settings, ScriptedBackend(down=down)) as app:
        transport = httpx.ASGITransport(app=app)
        clients = [
            httpx.AsyncClient(
                transport=transport,
                base_url="http://t",
                headers={"Authorization": f"Bearer {key}"},
            )
            for key in ("alice-key", "root-key")
        ]
        yield clients[0], clients[1]
        for client in clients:
            await client.aclose()


@needs_data
async def test_server_files_need_an_admin_and_bad_input_is_refused_at_once(
    scripted_client: tuple[httpx.AsyncClient, httpx.AsyncClient],
) -> None:
    alice, root = scripted_client
    assert_envelope(await alice.post("/v1/judge/evaluations", json={"data": str(DEV)}), 403, "data")
    # Missing, not votes, a folder or a name too long: one answer (no file-system oracle, and
    # no 500 for the long name; issue 23).
    answers = set()
    for data in ("no/such.jsonl", "/etc/passwd", "/etc", "x" * 300):
        refused = await root.post("/v1/judge/evaluations", json={"data": data})
        answers.add(assert_envelope(refused, 422, "data")["message"].replace(repr(data), "D"))
    assert len(answers) == 1, answers
    bad = await alice.post("/v1/judge/evaluations", json={"votes": [{"id": "x"}]})
    assert "vote 1 is not an MT-Bench human vote" in assert_envelope(bad, 422, "votes")["message"]
    both = await root.post("/v1/judge/evaluations", json={"data": "x", "votes": [{}]})
    assert_envelope(both, 422)
    ok = await root.post("/v1/judge/evaluations", json={"data": str(DEV), "limit": 4, "seed": 1})
    assert ok.status_code == 202, ok.text
    job = await wait_until(root, ok.json()["id"], finished)
    assert job["state"] == "succeeded", job
    assert job["result"]["config"]["data"] == str(DEV) and job["result"]["overall"]["votes"] == 4
    assert job["result"]["config"]["model"] == "scripted-judge"


@needs_data
@pytest.mark.parametrize("scripted_client", [True], indirect=True)
async def test_an_evaluation_whose_judge_answers_nothing_fails(
    scripted_client: tuple[httpx.AsyncClient, httpx.AsyncClient],
) -> None:
    alice, _ = scripted_client
    votes = [r for r in _rows() if r["human_winner"] != "tie"][:2]
    response = await alice.post("/v1/judge/evaluations", json={"votes": votes})
    job = await wait_until(alice, response.json()["id"], finished)
    assert job["state"] == "failed"
    assert job["error"] == "RuntimeError: the judge answered none of the 2 votes"
