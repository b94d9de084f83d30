"""Saved reward specs belong to the API key that saved them (issue 23, finding 1)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI

from services.app import create_app
from services.core.models.embedder import Embedder
from services.core.web.auth import key_owner
from services.settings import Settings
from tests.conftest import assert_envelope
from tests.services.judge.scripted import ScriptedBackend

A = {"Authorization": "Bearer tenant-a-key-000001"}
B = {"Authorization": "Bearer tenant-b-key-000002"}
ADMIN = {"Authorization": "Bearer operator-key-000003"}
FULL = {"channels": {"diversity": {"weight": 1.0}}}
HALF = {"channels": {"diversity": {"weight": 0.5}}}
GROUP = {"prompt": "Name a colour.", "completions": ["red", "a deep ocean blue", "green"]}


@pytest.fixture
async def keyed(
    settings: Settings, embedder: Embedder, scripted: ScriptedBackend
) -> AsyncIterator[httpx.AsyncClient]:
    keys = {
        "tenant-a-key-000001": ["reward"],
        "tenant-b-key-000002": ["reward"],
        "operator-key-000003": ["reward", "admin"],
    }
    app: FastAPI = create_app(
        settings.with_overrides(api_keys=keys), embedder=embedder, judge_backend=scripted
    )
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            yield client


async def _save(client: httpx.AsyncClient, headers: dict[str, str], **body: object) -> dict:  # type: ignore[type-arg]
    response = await client.post("/v1/rewards/specs", json=body, headers=headers)
    assert response.status_code == 201, response.text
    saved: dict = response.json()  # type: ignore[type-arg]
    return saved


async def _totals(client: httpx.AsyncClient, headers: dict[str, str], spec: str) -> list[float]:
    response = await client.post("/v1/rewards/group", json={**GROUP, "spec": spec}, headers=headers)
    assert response.status_code == 200, response.text
    return [r["total"] for r in response.json()["results"]]


async def test_another_key_cannot_see_or_overwrite_a_spec(keyed: httpx.AsyncClient) -> None:
    mine = await _save(keyed, A, name="s1", spec=FULL)
    theirs = await _save(keyed, B, name="s1", spec=HALF)
    # B's "s1" is its own first version, not A's version 2.
    assert (mine["version"], theirs["version"]) == (1, 1)
    assert mine["owner"] == key_owner("tenant-a-key-000001") != theirs["owner"]
    full, half = await _totals(keyed, A, "s1"), await _totals(keyed, B, "s1")
    assert full == [2 * t for t in half] and any(full)
    assert (await keyed.get("/v1/rewards/specs/s1", headers=A)).json()["spec"]["channels"][
        "diversity"
    ]["weight"] == 1.0
    only_b = await _save(keyed, B, name="b-only", spec=HALF)
    assert only_b["version"] == 1
    assert_envelope(await keyed.get("/v1/rewards/specs/b-only", headers=A), 404, "name")
    assert_envelope(await keyed.get("/v1/rewards/specs/b-only/versions", headers=A), 404, "name")
    unknown = await keyed.post("/v1/rewards/group", json={**GROUP, "spec": "b-only"}, headers=A)
    error = assert_envelope(unknown, 422, "spec")
    assert "'s1'" in error["message"] and "b-only" not in error["message"].split(";")[1]
    listed = (await keyed.get("/v1/rewards/specs", headers=A)).json()
    assert [(s["name"], s["owner"]) for s in listed["items"]] == [("s1", mine["owner"])]


async def test_an_admin_sees_all_and_shares(keyed: httpx.AsyncClient) -> None:
    mine = await _save(keyed, A, name="s1", spec=FULL)
    listed = (await keyed.get("/v1/rewards/specs", headers=ADMIN)).json()
    assert [(s["name"], s["owner"]) for s in listed["items"]] == [("s1", mine["owner"])]
    theirs = await keyed.get(f"/v1/rewards/specs/{mine['owner']}~s1@1", headers=ADMIN)
    assert theirs.json()["spec_hash"] == mine["spec_hash"]
    # A tenant cannot share, nor reach another key's spec by its stored name.
    refused = await keyed.post(
        "/v1/rewards/specs", json={"name": "x", "spec": FULL, "shared": True}, headers=B
    )
    assert_envelope(refused, 403, "shared")
    assert_envelope(await keyed.get(f"/v1/rewards/specs/{mine['owner']}~s1", headers=B), 422)
    shared = await _save(keyed, ADMIN, name="house", spec=HALF, shared=True)
    assert shared["owner"] is None
    assert await _totals(keyed, B, "house") == await _totals(keyed, A, "house")
    # A tenant's own spec of the same name comes first; the shared one stays for the others.
    await _save(keyed, A, name="house", spec=FULL)
    assert await _totals(keyed, A, "house") == [2 * t for t in await _totals(keyed, B, "house")]
    overwrite = await keyed.post(
        "/v1/rewards/specs", json={"name": "house", "spec": FULL, "shared": True}, headers=B
    )
    assert_envelope(overwrite, 403, "shared")
    names = {s["name"] for s in (await keyed.get("/v1/rewards/specs", headers=B)).json()["items"]}
    assert names == {"house"}
