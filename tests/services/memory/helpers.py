"""Scoring a run's steps through /v1/rewards/group and waiting for the memory."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from fastapi import FastAPI

from tests.services.memory.conftest import ANSWERS, RUBRIC, memory_of

RUN = "run-memory-1"


async def create_rubric(api: httpx.AsyncClient, body: dict[str, Any] | None = None) -> str:
    response = await api.post("/v1/rubrics", json=body or RUBRIC)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


async def score_step(
    api: httpx.AsyncClient,
    rubric_id: str,
    step: int,
    *,
    answers: list[str] | None = None,
    run: str = RUN,
    **options: Any,
) -> dict[str, Any]:
    channel = {"rubric_id": rubric_id, "adaptive": True, **options}
    body = {
        "prompt": RUBRIC["question"],
        "completions": answers or ANSWERS,
        "run_id": run,
        "step": step,
        "spec": {"channels": {"rubric": channel}},
    }
    response = await api.post("/v1/rewards/group", json=body)
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()
    return data


async def settle(app: FastAPI, admin: httpx.AsyncClient, run: str = RUN) -> list[dict[str, Any]]:
    """Wait until the memory took every queued group and no revision is queued or running;
    the run's revisions (newest first)."""
    await memory_of(app).drained()
    items: list[dict[str, Any]] = []
    for _ in range(2400):  # a bound on polls, not a time limit on the work
        response = await admin.get(f"/v1/memory/runs/{run}/revisions")
        if response.status_code == 404:
            return []
        items = response.json()["items"]
        if all(i["state"] not in ("queued", "running") for i in items):
            return items
        await asyncio.sleep(0.5)
    raise AssertionError(f"revisions never finished: {items}")


def memory_stamp(data: dict[str, Any]) -> dict[str, Any]:
    stamp: dict[str, Any] = data["results"][0]["channels"]["rubric"]["meta"]["memory"]
    return stamp
