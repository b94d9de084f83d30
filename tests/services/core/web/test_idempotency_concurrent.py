"""Concurrent retries with one Idempotency-Key store one group and get one answer (issue 9).

Before the fix each of 20 concurrent duplicates computed and stored its own group: the key
was recorded only after computing. Runs on SQLite and on the real Postgres.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

DUPLICATES = 20

ROUTES: dict[str, tuple[str, dict[str, Any]]] = {
    "ordinal": (
        "/v1/ordinal/advantages",
        {"groups": [{"id": "g", "scores": [1, 2, 3, 5]}], "k": 5},
    ),
    "diversity": ("/v1/diversity/group", {"completions": ["a red fox", "a blue sea", "xyz"]}),
    "rewards": (
        "/v1/rewards/group",
        {
            "prompt": "Name a colour.",
            "completions": ["GOOD red", "blue", "the sky"],
            "spec": {"channels": {"judge_scale": {"k": 5}, "diversity": {"weight": 0.5}}},
        },
    ),
}


async def _stored(client: httpx.AsyncClient, run_id: str) -> list[dict[str, Any]]:
    page = await client.get(f"/v1/runs/{run_id}/groups", params={"limit": 1000})
    groups: list[dict[str, Any]] = page.json()["items"]
    return groups


@pytest.mark.parametrize("route", sorted(ROUTES))
async def test_concurrent_duplicates_store_one_group(
    fast_client: httpx.AsyncClient, route: str
) -> None:
    path, body = ROUTES[route]
    run_id = f"run-{route}"
    body = {**body, "run_id": run_id, "step": 1}
    headers = {"Idempotency-Key": f"{route}-step-1"}
    answers = await asyncio.gather(
        *(fast_client.post(path, json=body, headers=headers) for _ in range(DUPLICATES))
    )
    assert [a.status_code for a in answers] == [200] * DUPLICATES, answers[0].text
    assert all(a.json() == answers[0].json() for a in answers)
    assert len(await _stored(fast_client, run_id)) == 1


async def test_keys_are_scoped_to_the_route(fast_client: httpx.AsyncClient) -> None:
    headers = {"Idempotency-Key": "same-key"}
    for route in ("ordinal", "diversity"):
        path, body = ROUTES[route]
        response = await fast_client.post(path, json={**body, "run_id": "scoped"}, headers=headers)
        assert response.status_code == 200, response.text
    assert {g["service"] for g in await _stored(fast_client, "scoped")} == {"ordinal", "diversity"}
