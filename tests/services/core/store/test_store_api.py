"""The artifacts admin API, in-process over HTTP, on SQLite and on the real Postgres."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI

from services.artifacts.app import create_app
from services.core.store.artifacts import ArtifactStore
from services.core.web.auth import key_owner
from services.settings import Settings
from tests.conftest import assert_envelope

ADMIN = {"Authorization": "Bearer ops-key"}
TRAINER = {"Authorization": "Bearer trainer-key"}
RUBRIC = {
    "question": "How long to boil an egg?",
    "criteria": [
        {"id": "c1", "text": "Says 7 minutes", "weight": 3, "kind": "required"},
        {"id": "c2", "text": "Recommends raw eggs", "weight": 2, "kind": "pitfall"},
    ],
}
REWORDED = {
    "question": "How long to boil an egg?",
    "criteria": [
        {"id": "c1", "text": "Says 6 to 7 minutes", "weight": 3, "kind": "required"},
        {"id": "c2", "text": "Recommends raw eggs", "weight": 2, "kind": "pitfall"},
    ],
}


@pytest.fixture
async def store_app(settings: Settings) -> AsyncIterator[FastAPI]:
    keys = {"trainer-key": ["reward"], "ops-key": ["admin"]}
    app = create_app(settings.model_copy(update={"api_keys": keys}))
    async with app.router.lifespan_context(app):
        yield app


@pytest.fixture
def store(store_app: FastAPI) -> ArtifactStore:
    """The store behind the app, to write versions the way a consumer service does."""
    resources = store_app.state.resources
    return ArtifactStore(resources.sessions, resources.settings.data_dir)


@pytest.fixture
async def client(store_app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=store_app)
    async with httpx.AsyncClient(transport=transport, base_url="http://plaudit.test") as c:
        yield c


async def seed(store: ArtifactStore) -> None:
    await store.put("boil", "rubric", RUBRIC, owner="key_author")
    await store.put("boil", "rubric", REWORDED, owner="key_author", metadata={"by": "memory"})
    await store.put("spec-a", "reward_spec", {"channels": {"judge_scale": {"weight": 1.0}}})


async def test_only_admin_keys_reach_the_artifacts(
    client: httpx.AsyncClient, store: ArtifactStore
) -> None:
    await seed(store)
    paths = [
        "/v1/artifacts",
        "/v1/artifacts/boil",
        "/v1/artifacts/boil/versions",
        "/v1/artifacts/boil/versions/1",
        "/v1/artifacts/boil/diff",
        "/v1/artifacts/boil/history",
    ]
    for path in paths:
        assert_envelope(await client.get(path), 401)
        forbidden = assert_envelope(await client.get(path, headers=TRAINER), 403)
        assert forbidden["type"] == "forbidden"
        assert (await client.get(path, headers=ADMIN)).status_code == 200, path
    for path in ("/v1/artifacts/boil/rollback", "/v1/artifacts/boil/promote"):
        assert_envelope(await client.post(path, json={"to": 1}, headers=TRAINER), 403)
    assert (await store.info("boil")).current_version == 2


async def test_listing_pages_and_kinds(client: httpx.AsyncClient, store: ArtifactStore) -> None:
    await seed(store)
    page = (await client.get("/v1/artifacts", headers=ADMIN)).json()
    assert (page["limit"], page["offset"], page["total"]) == (100, 0, 2)
    assert [(a["name"], a["kind"], a["current_version"]) for a in page["items"]] == [
        ("boil", "rubric", 2),
        ("spec-a", "reward_spec", 1),
    ]
    only = await client.get("/v1/artifacts", params={"kind": "reward_spec"}, headers=ADMIN)
    assert [a["name"] for a in only.json()["items"]] == ["spec-a"]
    second = await client.get("/v1/artifacts", params={"limit": 1, "offset": 1}, headers=ADMIN)
    assert second.json()["total"] == 2 and second.json()["items"][0]["name"] == "spec-a"
    bad = await client.get("/v1/artifacts", params={"kind": "Bad Kind"}, headers=ADMIN)
    assert_envelope(bad, 422, "kind")


async def test_get_by_name_and_reference(client: httpx.AsyncClient, store: ArtifactStore) -> None:
    await seed(store)
    current = (await client.get("/v1/artifacts/boil", headers=ADMIN)).json()
    assert current["artifact"]["latest_version"] == 2
    assert current["version"]["version"] == 2 and current["version"]["content"] == REWORDED
    assert current["version"]["owner"] == "key_author" and current["version"]["current"]
    first = (await client.get("/v1/artifacts/boil@1", headers=ADMIN)).json()
    assert first["version"]["content"] == RUBRIC and not first["version"]["current"]
    one = (await client.get("/v1/artifacts/boil/versions/1", headers=ADMIN)).json()
    assert one["content"] == RUBRIC and one["content_hash"] == first["version"]["content_hash"]
    versions = (await client.get("/v1/artifacts/boil/versions", headers=ADMIN)).json()
    assert [v["version"] for v in versions["items"]] == [2, 1] and versions["total"] == 2
    assert "content" not in versions["items"][0]
    assert versions["items"][0]["metadata"] == {"by": "memory"}


async def test_unknown_is_404_and_malformed_is_422(
    client: httpx.AsyncClient, store: ArtifactStore
) -> None:
    await seed(store)
    for path in (
        "/v1/artifacts/nope",
        "/v1/artifacts/nope@2",
        "/v1/artifacts/boil@9",
        "/v1/artifacts/nope/versions",
        "/v1/artifacts/boil/versions/9",
        "/v1/artifacts/nope/history",
        "/v1/artifacts/boil/diff?from=1&to=9",
    ):
        error = assert_envelope(await client.get(path, headers=ADMIN), 404)
        assert error["type"] == "not_found", path
    bad_ref = assert_envelope(await client.get("/v1/artifacts/boil@x", headers=ADMIN), 422, "name")
    assert "bad version 'x'" in bad_ref["message"]
    assert_envelope(await client.get("/v1/artifacts/boil@0", headers=ADMIN), 422, "name")
    assert_envelope(await client.get("/v1/artifacts/boil/versions/x", headers=ADMIN), 422)
    assert_envelope(await client.get("/v1/artifacts/boil/versions/0", headers=ADMIN), 422)
    assert_envelope(await client.get("/v1/artifacts/boil/diff?from=x", headers=ADMIN), 422, "from")
    assert_envelope(await client.get("/v1/artifacts/b@1/versions", headers=ADMIN), 422, "name")
    rollback = await client.post("/v1/artifacts/nope/rollback", json={"to": 1}, headers=ADMIN)
    assert_envelope(rollback, 404)
    typo = await client.post("/v1/artifacts/boil/rollback", json={"too": 1}, headers=ADMIN)
    assert_envelope(typo, 422)


async def test_diff_by_criterion_id(client: httpx.AsyncClient, store: ArtifactStore) -> None:
    await seed(store)
    diff = (await client.get("/v1/artifacts/boil/diff?from=1&to=2", headers=ADMIN)).json()
    assert (diff["from_version"], diff["to_version"], diff["identical"]) == (1, 2, False)
    assert diff["changed"] == [
        {
            "path": "criteria[id=c1].text",
            "at": ["criteria", {"id": "c1"}, "text"],
            "old": "Says 7 minutes",
            "new": "Says 6 to 7 minutes",
        }
    ]
    assert diff["added"] == [] and diff["removed"] == []
    assert [e["path"] for e in diff["metadata"]["added"]] == ["by"]
    default = (await client.get("/v1/artifacts/boil/diff", headers=ADMIN)).json()
    assert default["changed"] == diff["changed"]


async def test_rollback_is_recorded_with_its_caller(
    client: httpx.AsyncClient, store: ArtifactStore
) -> None:
    await seed(store)
    body = {"to": 1, "note": "the reworded criterion let hacks through", "expected_version": 2}
    moved = await client.post("/v1/artifacts/boil/rollback", json=body, headers=ADMIN)
    assert moved.status_code == 200, moved.text
    event = moved.json()["event"]
    assert (event["action"], event["from_version"], event["to_version"]) == ("rollback", 2, 1)
    assert event["owner"] == key_owner("ops-key") and "ops-key" not in moved.text
    assert moved.json()["artifact"]["current_version"] == 1
    assert (await client.get("/v1/artifacts/boil", headers=ADMIN)).json()["version"]["content"] == (
        RUBRIC
    )
    stale = await client.post("/v1/artifacts/boil/rollback", json=body, headers=ADMIN)
    assert_envelope(stale, 409, "expected_version")
    forward = await client.post("/v1/artifacts/boil/rollback", json={"to": 2}, headers=ADMIN)
    assert_envelope(forward, 422, "to")
    promoted = await client.post("/v1/artifacts/boil/promote", json={"to": 2}, headers=ADMIN)
    assert promoted.json()["event"]["action"] == "promote"
    history = (await client.get("/v1/artifacts/boil/history", headers=ADMIN)).json()
    assert history["total"] == 4
    assert [(e["action"], e["from_version"], e["to_version"]) for e in history["items"]] == [
        ("promote", 1, 2),
        ("rollback", 2, 1),
        ("create", 1, 2),
        ("create", None, 1),
    ]
    assert history["items"][1]["note"] == body["note"]
    # Both versions are intact after all the moves.
    versions = (await client.get("/v1/artifacts/boil/versions", headers=ADMIN)).json()
    assert versions["total"] == 2
