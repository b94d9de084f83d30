"""The same job tests on both runners: in-process, and arq through a real ``plaudit worker``."""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

import pytest
from fastapi import FastAPI

from tests.conftest import assert_envelope
from tests.services.core.jobs.conftest import (
    ALICE,
    ROOT,
    Client,
    Runner,
    finished,
    started,
    wait_until,
    with_jobs,
)

pytestmark = pytest.mark.slow


def ran_in(job: dict[str, Any], runner: Runner) -> int:
    """The pid of the process that ran ``job`` (its worker id is host:pid:role-token)."""
    _host, pid, role = job["worker"].split(":")
    assert role.startswith(runner.worker_role + "-"), job["worker"]
    return int(pid)


async def test_a_job_runs_reports_progress_and_succeeds(runner: Runner, as_key: Client) -> None:
    alice = as_key("alice-key")
    response = await alice.post("/v1/jobs/probe", json={"steps": 5, "delay_s": 0.3})
    assert response.status_code == 202, response.text
    job = response.json()
    assert response.headers["location"] == f"/v1/jobs/{job['id']}"
    assert job["state"] == "queued" and job["kind"] == "jobs.probe" and job["owner"] == ALICE
    running = await wait_until(
        alice, job["id"], lambda j: j["state"] == "running" and j["progress"]["done"] >= 1
    )
    assert running["started_at"] is not None and running["finished_at"] is None
    assert running["progress"]["total"] == 5 and running["progress"]["stage"] == "probing"
    assert running["progress"]["done"] < 5, "progress is visible while the job runs"
    done = await wait_until(alice, job["id"], finished)
    assert done["state"] == "succeeded", done
    assert done["progress"] == {"done": 5, "total": 5, "stage": "probing", "fraction": 1.0}
    assert done["result"]["steps"] == 5 and done["result"]["worker"] == done["worker"]
    assert done["params"] == {"steps": 5, "delay_s": 0.3, "fail_at": None}
    assert done["created_at"] <= done["started_at"] <= done["finished_at"]
    expected_pid = runner.worker.pid if runner.worker is not None else os.getpid()
    assert ran_in(done, runner) == expected_pid


async def test_a_failing_job_records_its_error(runner: Runner, as_key: Client) -> None:
    alice = as_key("alice-key")
    job = (await alice.post("/v1/jobs/probe", json={"steps": 5, "fail_at": 3})).json()
    done = await wait_until(alice, job["id"], finished)
    assert done["state"] == "failed"
    assert done["error"] == "RuntimeError: the probe failed at step 3, as asked"
    assert done["progress"]["done"] == 2 and done["result"] is None


async def test_cancel_stops_a_running_job(runner: Runner, as_key: Client) -> None:
    alice = as_key("alice-key")
    job = (await alice.post("/v1/jobs/probe", json={"steps": 200, "delay_s": 0.05})).json()
    await wait_until(alice, job["id"], lambda j: j["progress"]["done"] >= 2)
    asked = await alice.post(f"/v1/jobs/{job['id']}/cancel")
    assert asked.status_code == 200, asked.text
    assert asked.json()["state"] in ("running", "cancelled")
    done = await wait_until(alice, job["id"], finished, within=30)
    assert done["state"] == "cancelled" and done["error"] == "cancelled while running"
    assert 2 <= done["progress"]["done"] < 200
    again = await alice.post(f"/v1/jobs/{job['id']}/cancel")
    assert_envelope(again, 409, "job_id")


async def test_cancel_of_a_queued_job_means_it_never_starts(runner: Runner, as_key: Client) -> None:
    alice = as_key("alice-key")
    first = (await alice.post("/v1/jobs/probe", json={"steps": 200, "delay_s": 0.05})).json()
    await wait_until(alice, first["id"], lambda j: j["state"] == "running")
    waiting = (await alice.post("/v1/jobs/probe", json={"steps": 1})).json()
    cancelled = (await alice.post(f"/v1/jobs/{waiting['id']}/cancel")).json()
    assert cancelled["state"] == "cancelled", "concurrency 1: the second job was still queued"
    await alice.post(f"/v1/jobs/{first['id']}/cancel")
    await wait_until(alice, first["id"], finished, within=30)
    await asyncio.sleep(0.5)  # the worker has now seen the queued job and skipped it
    final = (await alice.get(f"/v1/jobs/{waiting['id']}")).json()
    assert final["state"] == "cancelled" and final["started_at"] is None
    assert final["error"] == "cancelled before it started"


async def test_each_key_sees_its_own_jobs_and_an_admin_sees_all(
    runner: Runner, as_key: Client
) -> None:
    alice, bob, root = as_key("alice-key"), as_key("bob-key"), as_key("root-key")
    mine = [(await alice.post("/v1/jobs/probe", json={"steps": 1})).json() for _ in range(3)]
    theirs = (await bob.post("/v1/jobs/probe", json={"steps": 1, "fail_at": 1})).json()
    for job in [*mine, theirs]:
        await wait_until(root, job["id"], finished)
    page = (await alice.get("/v1/jobs", params={"limit": 2})).json()
    assert page["total"] == 3 and page["limit"] == 2 and page["offset"] == 0
    assert [j["id"] for j in page["items"]] == [mine[2]["id"], mine[1]["id"]], "newest first"
    assert page["items"][0]["params"] is None and page["items"][0]["result"] is None
    rest = (await alice.get("/v1/jobs", params={"limit": 2, "offset": 2})).json()
    assert [j["id"] for j in rest["items"]] == [mine[0]["id"]]
    assert_envelope(await bob.get(f"/v1/jobs/{mine[0]['id']}"), 404, "job_id")
    assert_envelope(await bob.post(f"/v1/jobs/{mine[0]['id']}/cancel"), 404, "job_id")
    everyone = (await root.get("/v1/jobs")).json()
    assert everyone["total"] == 4
    failed = (await root.get("/v1/jobs", params={"state": "failed"})).json()
    assert [j["id"] for j in failed["items"]] == [theirs["id"]]
    probes = (await bob.get("/v1/jobs", params={"kind": "jobs.probe"})).json()
    assert probes["total"] == 1
    assert (await root.get(f"/v1/jobs/{mine[0]['id']}")).json()["owner"] == ALICE
    assert_envelope(await as_key("wrong-key").get("/v1/jobs"), 401)


async def test_progress_streams_as_server_sent_events(runner: Runner, as_key: Client) -> None:
    alice = as_key("alice-key")
    job = (await alice.post("/v1/jobs/probe", json={"steps": 4, "delay_s": 0.4})).json()
    async with alice.stream("GET", f"/v1/jobs/{job['id']}/events") as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        body = (await response.aread()).decode()
    events = [_event(block) for block in body.strip().split("\n\n") if block.strip()]
    names = [name for name, _ in events]
    assert names[-1] == "finished" and set(names[:-1]) == {"progress"}
    done_counts = [data["progress"]["done"] for _, data in events]
    assert done_counts == sorted(done_counts) and len(set(done_counts)) >= 3
    assert events[-1][1]["state"] == "succeeded" and events[-1][1]["result"]["steps"] == 4
    assert_envelope(await as_key("bob-key").get(f"/v1/jobs/{job['id']}/events"), 404)


def _event(block: str) -> tuple[str, dict[str, Any]]:
    fields = dict(line.split(": ", 1) for line in block.splitlines())
    return fields["event"], json.loads(fields["data"])


async def test_finished_jobs_expire(runner: Runner, judge_backend: Any) -> None:
    settings = with_jobs(runner.settings, expire_after_s=0.5, sweep_interval_s=0.2)
    async with started(settings, judge_backend) as app:
        queue = app.state.resources.jobs
        short = await queue.submit("jobs.probe", {"steps": 1, "delay_s": 0}, owner=ALICE)
        long = await queue.submit("jobs.probe", {"steps": 40, "delay_s": 0.1}, owner=ALICE)
        for _ in range(200):
            if await queue.store.get(short.id) is None:
                break
            await asyncio.sleep(0.05)
        assert await queue.store.get(short.id) is None, "the finished job was deleted"
        still = await queue.store.get(long.id)
        assert still is not None and still.state in ("queued", "running"), "running jobs stay"
        await _cancel_and_wait(app, long.id)


async def _cancel_and_wait(app: FastAPI, job_id: str) -> None:
    queue = app.state.resources.jobs
    await queue.cancel(job_id)
    for _ in range(200):
        job = await queue.store.get(job_id)
        if job is None or job.state in ("cancelled", "failed", "succeeded"):
            return
        await asyncio.sleep(0.05)


async def test_start_with_an_idempotency_key_starts_one_job(runner: Runner, as_key: Client) -> None:
    root = as_key("root-key")
    headers = {"Idempotency-Key": "probe-once"}
    first = await root.post("/v1/jobs/probe", json={"steps": 1}, headers=headers)
    second = await root.post("/v1/jobs/probe", json={"steps": 1}, headers=headers)
    assert first.status_code == second.status_code == 202
    assert first.json()["id"] == second.json()["id"]
    assert second.headers["location"] == first.headers["location"]
    other = await root.post("/v1/jobs/probe", json={"steps": 2}, headers=headers)
    assert_envelope(other, 409, "Idempotency-Key")
    await wait_until(root, first.json()["id"], finished)
    assert (await root.get("/v1/jobs")).json()["total"] == 1
    assert (await root.get("/v1/jobs")).json()["items"][0]["owner"] == ROOT
