"""The real job kinds resume from their checkpoints (issue 23): a server (in-process runner,
SQLite) or a ``plaudit worker`` (arq, Postgres + Redis) is SIGKILLed in the middle of a
rubric synthesis, a judge evaluation or a run's rescoring; the job runs again and carries on
from its last checkpoint: what the killed attempt stored is kept, not done again, and the
final result has every document, vote or group once.

The processes, the database, Redis and the kill are real; the model is the scripted
generator and rubric judge (tests/services/core/jobs/scripted_plaudit.py), slowed so the kill lands
mid-job. The real-model runs of both jobs are tests/services/rubrics/test_synthesis_real.py and
tests/services/core/jobs/test_evaluation_job.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from pydantic import SecretStr
from sqlalchemy import select

from services.app import create_app
from services.core.db import engine as db
from services.core.db.tables import Job, RubricInstanceRecord
from services.core.jobs.settings import JobsSettings
from services.core.jobs.store import JobStore
from services.core.store.artifacts import ArtifactStore
from services.settings import Settings
from tests.conftest import require_services
from tests.services.core.jobs.conftest import ALICE, FAST_JOBS, FENCE_SECRET, KEYS, jobs_env
from tests.services.core.jobs.scripted_plaudit import LoggingSynthBackend, document_key
from tests.services.rubrics.synth_docs import DOCS
from tests.serving import free_port

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[4]
QUEUE = "plaudit:jobs:checkpoints"
#: Seconds each scripted model call takes: long enough that the test sees a checkpoint and
#: kills the process before the job ends (the waits below are on states, not on time).
MODEL_DELAY_S = 0.8


@pytest.fixture(params=["inprocess", "arq"])
def settings(request: pytest.FixtureRequest) -> Settings:
    """SQLite with jobs in the serving process, or Postgres + Redis with workers on a queue
    of this module's own; one document or vote per batch, so each is a checkpoint."""
    jobs: dict[str, Any] = dict(FAST_JOBS)
    if request.param == "inprocess":
        base: Settings = request.getfixturevalue("embedded_settings")
    else:
        require_services()
        base = request.getfixturevalue("deployed_settings")
        jobs["queue_name"] = QUEUE
    return base.model_copy(
        update={
            "api_keys": KEYS,
            "jobs": JobsSettings(**jobs),
            "judge": base.judge.model_copy(update={"fence_secret": SecretStr(FENCE_SECRET)}),
            "rubrics": base.rubrics.model_copy(update={"synthesis_batch": 1}),
        }
    )


@pytest.fixture
async def store(settings: Settings) -> AsyncIterator[JobStore]:
    url = settings.resolved_database_url
    if settings.auto_migrate:  # the embedded SQLite file (Postgres is migrated already)
        await db.upgrade_async(url)
    engine = db.make_engine(url)
    yield JobStore(db.make_sessionmaker(engine))
    await engine.dispose()


@contextlib.contextmanager
def scripted(
    argv: list[str], env: Mapping[str, str], log: Path
) -> Iterator[subprocess.Popen[bytes]]:
    """``plaudit <argv>`` with the scripted model (a real process); stopped at the end."""
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.services.core.jobs.scripted_plaudit", *argv],
            env=dict(env),
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _env(settings: Settings, calls: Path) -> dict[str, str]:
    env = jobs_env(
        settings,
        PLAUDIT_API_KEYS=json.dumps(KEYS),
        PLAUDIT_RUBRICS_SYNTHESIS_BATCH="1",
        PLAUDIT_TEST_MODEL_DELAY_S=str(MODEL_DELAY_S),
        PLAUDIT_TEST_CALL_LOG=str(calls),
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    )
    if settings.redis_url:
        env["PLAUDIT_JOBS_QUEUE_NAME"] = QUEUE
    return env


@contextlib.asynccontextmanager
async def started(settings: Settings, backend: Any) -> AsyncIterator[FastAPI]:
    """Every service with ``backend`` as its model, lifespan run: a server start."""
    app = create_app(settings, judge_backend=backend)
    async with app.router.lifespan_context(app):
        yield app


async def _post_when_up(port: int, path: str, body: dict[str, Any], proc: Any, log: Path) -> str:
    headers = {"Authorization": "Bearer alice-key"}
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", headers=headers) as client:
        for _ in range(1200):
            assert proc.poll() is None, log.read_text()
            try:
                response = await client.post(path, json=body)
            except httpx.TransportError:
                await asyncio.sleep(0.2)
                continue
            if response.status_code == 202:
                return str(response.json()["id"])
            assert response.status_code == 503, response.text  # still starting
            await asyncio.sleep(0.2)
    pytest.fail(f"the server never took the job:\n{log.read_text()}")


async def _until(
    store: JobStore, job_id: str, done: Callable[[Job], bool], what: str, within: float = 300
) -> Job:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        job = await store.get(job_id)
        if job is not None and done(job):
            return job
        await asyncio.sleep(0.05)
    job = await store.get(job_id)
    pytest.fail(f"job {job_id} never {what}: {job and (job.state, job.checkpoint, job.error)}")


def _finished(job: Job) -> bool:
    return job.state in ("succeeded", "failed", "cancelled")


class Victims:
    """The processes that run a job: one server (in-process runner), or two workers on the
    module's queue (one is killed, the other carries on). Each logs what its model drafted."""

    def __init__(self, settings: Settings, tmp_path: Path, stack: contextlib.ExitStack) -> None:
        self.settings, self.tmp_path, self._stack = settings, tmp_path, stack
        self.procs: list[subprocess.Popen[bytes]] = []

    def calls(self, index: int) -> Path:
        return self.tmp_path / f"calls-{index}.log"

    def _start(self, argv: list[str]) -> subprocess.Popen[bytes]:
        index = len(self.procs)
        env = _env(self.settings, self.calls(index))
        proc = self._stack.enter_context(scripted(argv, env, self.tmp_path / f"p{index}.log"))
        self.procs.append(proc)
        return proc

    async def submit(
        self, kind: str, path: str, body: dict[str, Any], params: dict[str, Any] | None = None
    ) -> str:
        """Start the job: posted to ``path`` with ``body`` on a server, or submitted to the
        workers' queue with ``params`` (default: ``body``)."""
        if self.settings.redis_url is None:
            port = free_port()
            proc = self._start(["serve", "all", "--host", "127.0.0.1", "--port", str(port)])
            return await _post_when_up(port, path, body, proc, self.tmp_path / "p0.log")
        self._start(["worker"])
        self._start(["worker"])
        async with started(self.settings, LoggingSynthBackend(None, 0.0)) as app:
            job = await app.state.resources.jobs.submit(kind, params or body, owner=ALICE)
        return str(job.id)

    def kill_holder(self, job: Job) -> int:
        """SIGKILL the process that runs ``job``; returns its index."""
        [index] = [i for i, p in enumerate(self.procs) if f":{p.pid}:" in str(job.worker)]
        self.procs[index].kill()
        self.procs[index].wait()
        return index

    async def resume(self, store: JobStore, job_id: str, killed: int) -> tuple[Job, Path]:
        """Let the job run again (a server restart here, or the other worker); returns the
        finished job and the log of what the resuming model drafted."""
        if self.settings.redis_url is None:
            calls = self.tmp_path / "calls-restart.log"
            async with started(self.settings, LoggingSynthBackend(str(calls), 0.0)):
                job = await _until(store, job_id, _finished, "finished")
            return job, calls
        job = await _until(store, job_id, _finished, "finished")
        other = 1 - killed
        assert self.procs[other].poll() is None
        assert f":{self.procs[other].pid}:" in str(job.worker)
        return job, self.calls(other)


@pytest.fixture
def victims(settings: Settings, tmp_path: Path) -> Iterator[Victims]:
    with contextlib.ExitStack() as stack:
        yield Victims(settings, tmp_path, stack)


def _drafted(checkpoint: dict[str, Any]) -> set[int]:
    return {int(p) for p in checkpoint["settled"]} | {int(p) for p in checkpoint["survivors"]}


def _mid_drafting(job: Job) -> bool:
    """Two candidates drafted, documents still to draft."""
    point = job.checkpoint or {}
    return job.state == "running" and len(point.get("survivors", {})) >= 2


def _mid_judging(job: Job) -> bool:
    """Stage 5 judged at least one candidate and has more to judge."""
    point = job.checkpoint or {}
    survivors = set(point.get("survivors", {}))
    settled = {str(p) for p in point.get("settled", [])}
    return job.state == "running" and 0 < len(survivors & settled) < len(survivors)


async def _instances(settings: Settings, job_id: str) -> list[RubricInstanceRecord]:
    engine = db.make_engine(settings.resolved_database_url)
    try:
        async with db.make_sessionmaker(engine)() as session:
            query = select(RubricInstanceRecord).where(RubricInstanceRecord.job_id == job_id)
            return list((await session.scalars(query)).all())
    finally:
        await engine.dispose()


async def _rubric_ids(settings: Settings, job_id: str) -> list[str]:
    engine = db.make_engine(settings.resolved_database_url)
    try:
        store = ArtifactStore(db.make_sessionmaker(engine), settings.data_dir)
        found, _ = await store.page_current(
            "rubric", content_equals={"source": f"synthesis:{job_id}"}, limit=1000
        )
        return [info.name for info, _ in found]
    finally:
        await engine.dispose()


def _logged(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


async def test_a_killed_synthesis_job_keeps_its_instances_and_drafts_only_the_rest(
    settings: Settings, store: JobStore, victims: Victims
) -> None:
    """Killed while drafting (server) or while judging the candidates (worker): the retry
    keeps the stored instances, drafts only the documents the checkpoint does not hold, and
    every document ends as exactly one instance; every kept one has exactly one rubric."""
    job_id = await victims.submit(
        "rubrics.synthesize", "/v1/rubrics/synthesize", {"documents": DOCS}
    )
    mid = _mid_drafting if settings.redis_url is None else _mid_judging
    running = await _until(store, job_id, mid, "reached the point of the kill")
    killed = victims.kill_holder(running)
    at_kill = (await store.get(job_id)).checkpoint  # type: ignore[union-attr]
    before = {row.position: row.id for row in await _instances(settings, job_id)}
    assert before and set(before) == {int(p) for p in at_kill["settled"]}

    job, resumed_calls = await victims.resume(store, job_id, killed)

    assert job.state == "succeeded", job.error
    assert job.attempts == 2 and job.error is None
    rows = await _instances(settings, job_id)
    assert sorted(r.position for r in rows) == list(range(len(DOCS)))  # no loss, no duplicate
    assert {r.position: r.id for r in rows if r.position in before} == before  # kept as stored
    keys = [document_key(d["text"]) for d in DOCS]
    done_before = {keys[p] for p in _drafted(at_kill)}
    again = _logged(resumed_calls)
    assert not done_before & set(again), "the retry drafted a document the checkpoint held"
    assert len(again) == len(set(again))
    first = _logged(victims.calls(killed))
    if settings.redis_url is None:  # killed while drafting: the rest is drafted now
        reached = {keys[r.position] for r in rows if r.stage not in ("filter", "domain")}
        assert again and set(first) | set(again) == reached
    else:  # killed while judging: nothing is drafted again
        assert again == []
    kept = [r for r in rows if r.status == "kept"]
    result = job.result
    assert result["documents"] == len(DOCS) and result["kept"] == len(kept) >= 3
    assert sorted(result["rubric_ids"]) == sorted(f"{r.rubric_id}@{r.rubric_version}" for r in kept)
    assert sorted(await _rubric_ids(settings, job_id)) == sorted(str(r.rubric_id) for r in kept)
    stages = {s["stage"]: s for s in result["stages"]}
    assert stages["filter"]["rejected"] == 1 and stages["generate"]["rejected"] == 1


def _votes(n: int) -> list[dict[str, Any]]:
    """MT-Bench-shaped votes written for this test."""

    def conversation(question: str, answer: str) -> list[dict[str, str]]:
        return [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]

    rows = []
    for i in range(n):
        question = f"Question {i}: name one use of the number {i}."
        rows.append(
            {
                "id": f"vote-{i:02d}",
                "category": ("writing", "math")[i % 2],
                "turn": 1,
                "conversation_a": conversation(question, f"The number {i} counts things."),
                "conversation_b": conversation(question, f"{i} is a number."),
                "human_winner": ("a", "b", "tie")[i % 3],
                "gpt4_winner": "a",
            }
        )
    return rows


async def test_a_killed_evaluation_keeps_the_votes_it_judged(
    settings: Settings, store: JobStore, victims: Victims
) -> None:
    """Killed after a few votes: the retry starts after the last checkpointed vote, and the
    report counts every vote once."""
    votes = _votes(12)
    body = {"votes": votes, "source": "checkpoint-test", "batch": 1}
    job_id = await victims.submit("judge.evaluation", "/v1/judge/evaluations", body)

    def judged_some(job: Job) -> bool:
        return job.state == "running" and len((job.checkpoint or {}).get("outcomes", [])) >= 3

    running = await _until(store, job_id, judged_some, "judged three votes")
    killed = victims.kill_holder(running)
    at_kill = (await store.get(job_id)).checkpoint  # type: ignore[union-attr]
    assert 3 <= len(at_kill["outcomes"]) < len(votes)

    job, _ = await victims.resume(store, job_id, killed)

    assert job.state == "succeeded", job.error
    assert job.attempts == 2 and job.error is None
    report = job.result
    assert report["config"]["resumed_from"] == len(at_kill["outcomes"])  # not from vote 0
    assert report["overall"]["votes"] == len(votes) and report["overall"]["failed"] == 0
    assert sum(c["votes"] for c in report["per_category"].values()) == len(votes)
    assert [o[0] for o in job.checkpoint["outcomes"]] == [v["id"] for v in votes]
    assert job.checkpoint["outcomes"][: len(at_kill["outcomes"])] == at_kill["outcomes"]


async def _store_run(settings: Settings, run_id: str, groups: int) -> list[str]:
    """``groups`` reward groups of ``run_id`` stored as Alice's (scored on diversity, so the
    judge cache holds nothing for the rescoring); their ids in scoring order."""
    async with started(settings, LoggingSynthBackend(None, 0.0)) as app:
        transport = httpx.ASGITransport(app=app)
        headers = {"Authorization": "Bearer alice-key"}
        async with httpx.AsyncClient(
            transport=transport, base_url="http://t", headers=headers
        ) as c:
            for step in range(groups):
                body = {
                    "prompt": f"Name {step + 2} colours.",
                    "completions": ["GOOD red and blue", f"green {step}", "a cat sat"],
                    "spec": {"channels": {"diversity": {}}},
                    "run_id": run_id,
                    "step": step,
                }
                stored = await c.post("/v1/rewards/group", json=body)
                assert stored.status_code == 200, stored.text
            page = await c.get(f"/v1/runs/{run_id}/groups", params={"limit": groups})
    return [g["id"] for g in page.json()["items"]]


async def test_a_killed_rescore_keeps_the_groups_it_rescored(
    settings: Settings, store: JobStore, victims: Victims
) -> None:
    """Killed after a few groups (each one scripted judge call): the retry goes on after the
    last checkpointed group, and the report lists every group once."""
    ids = await _store_run(settings, "ckpt-run", 10)
    spec = {"channels": {"judge_scale": {"k": 10}}}
    params = {"spec": spec, "run_id": "ckpt-run"}
    job_id = await victims.submit(
        "runs.rescore", "/v1/runs/ckpt-run/rescore", {"spec": spec}, params
    )

    def rescored_some(job: Job) -> bool:
        return job.state == "running" and (job.checkpoint or {}).get("done", 0) >= 3

    running = await _until(store, job_id, rescored_some, "rescored three groups")
    killed = victims.kill_holder(running)
    at_kill = (await store.get(job_id)).checkpoint  # type: ignore[union-attr]
    assert 3 <= at_kill["done"] < len(ids)

    job, _ = await victims.resume(store, job_id, killed)

    assert job.state == "succeeded", job.error
    assert job.attempts == 2 and job.error is None
    report = job.result
    assert report["resumed_from"] == at_kill["done"]  # not from group 0
    assert [g["id"] for g in report["per_group"]] == ids  # every group once, in order
    assert report["per_group"][: at_kill["done"]] == at_kill["listed"]  # kept as rescored
    assert report["groups"] == report["rescored"] == len(ids) and report["failed"] == 0
