"""Idempotency-Key records belong to the API key that sent them (issue 9)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import select

from services.core.db.tables import IdempotencyRecord
from tests.conftest import assert_envelope
from tests.services.core.web.test_idempotency_concurrent import ROUTES


@pytest.fixture
def overrides() -> dict[str, Any]:
    return {"api_keys": {"trainer-one-key-0001": ["reward"], "trainer-two-key-0002": ["reward"]}}


async def test_keys_are_scoped_to_the_api_key(fast_client: httpx.AsyncClient) -> None:
    path, body = ROUTES["ordinal"]
    other_body = {"groups": [{"scores": [5, 1]}], "k": 5}
    replay = {"Idempotency-Key": "step-9"}
    one = {**replay, "Authorization": "Bearer trainer-one-key-0001"}
    two = {**replay, "Authorization": "Bearer trainer-two-key-0002"}
    first = await fast_client.post(path, json={**body, "run_id": "r"}, headers=one)
    # Another key's request with the same Idempotency-Key is its own request, not a conflict.
    second = await fast_client.post(path, json={**other_body, "run_id": "r"}, headers=two)
    assert first.status_code == second.status_code == 200, second.text
    assert first.json() != second.json()
    again = await fast_client.post(path, json={**other_body, "run_id": "r"}, headers=one)
    assert_envelope(again, 409, "Idempotency-Key")
    # Each key sees its own group of the run (tenants are separate).
    for headers in (one, two):
        listed = await fast_client.get("/v1/runs/r/groups", headers=headers)
        assert len(listed.json()["items"]) == 1


async def test_records_name_no_secret(fast_app: FastAPI, fast_client: httpx.AsyncClient) -> None:
    path, body = ROUTES["ordinal"]
    headers = {"Idempotency-Key": "k", "Authorization": "Bearer trainer-one-key-0001"}
    assert (await fast_client.post(path, json=body, headers=headers)).status_code == 200
    async with fast_app.state.resources.sessions() as session:
        [record] = (await session.scalars(select(IdempotencyRecord))).all()
    assert record.principal and "trainer" not in record.principal
    assert record.key == "k" and record.endpoint == "ordinal.advantages"
    assert record.state == "done"
