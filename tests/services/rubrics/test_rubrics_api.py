"""Rubrics as data over HTTP, on SQLite and on Postgres: create, edit with stable criterion
ids, versions, diff, rollback, listing, JSONL import, validation errors and tenants."""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from services.core.models.embedder import Embedder
from services.settings import Settings
from tests.conftest import assert_envelope
from tests.services.rubrics.conftest import ADMIN_KEY, BOIL, OTHER_KEY, REWARD_KEY, create
from tests.services.rubrics.scripted import RubricScriptedBackend


def _edit(rubric: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """A PUT body from a rubric as the API returned it."""
    body = {k: rubric[k] for k in ("name", "question", "reference_answer", "domain", "source")}
    body["criteria"] = copy.deepcopy(rubric["criteria"])
    body.update(changes)
    return body


async def test_create_assigns_an_id_version_and_criterion_ids(api: httpx.AsyncClient) -> None:
    rubric = await create(api)
    assert rubric["id"].startswith("rb_") and rubric["version"] == 1
    assert rubric["current_version"] == rubric["latest_version"] == 1
    assert [c["id"] for c in rubric["criteria"]] == ["c1", "c2", "c3"]
    assert rubric["criteria"][0] == {
        "id": "c1",
        "text": "Says that the air pressure is lower",
        "weight": 3.0,
        "kind": "required",
        "anchor": False,
    }
    assert rubric["criteria"][2]["kind"] == "pitfall"
    assert (rubric["name"], rubric["domain"], rubric["source"]) == ("boil", "science", "tests")
    fetched = (await api.get(f"/v1/rubrics/{rubric['id']}")).json()
    pinned = (await api.get(f"/v1/rubrics/{rubric['id']}@1")).json()
    assert fetched == pinned == rubric


async def test_edits_keep_criterion_ids_and_diff_by_id(api: httpx.AsyncClient) -> None:
    v1 = await create(api)
    rid = v1["id"]
    body = _edit(v1, question="Why does water boil sooner at altitude?")
    body["criteria"][1]["text"] = "States how much the boiling point drops per 300 m"
    body["criteria"] = [*body["criteria"][:2], {"text": "Mentions vapour pressure", "weight": 2}]
    response = await api.put(f"/v1/rubrics/{rid}", json={**body, "expected_version": 1})
    assert response.status_code == 200, response.text
    v2 = response.json()
    assert v2["version"] == 2 and v2["current_version"] == 2
    # c3 was removed: the new criterion gets c4, an id is never reused
    assert [c["id"] for c in v2["criteria"]] == ["c1", "c2", "c4"]

    diff = (await api.get(f"/v1/rubrics/{rid}/diff", params={"from": 1, "to": 2})).json()
    assert diff["id"] == rid and (diff["from"], diff["to"]) == (1, 2)
    assert diff["fields"] == {
        "question": {"from": BOIL["question"], "to": "Why does water boil sooner at altitude?"}
    }
    assert [c["id"] for c in diff["added"]] == ["c4"]
    assert [c["id"] for c in diff["removed"]] == ["c3"]
    assert diff["changed"] == [
        {
            "id": "c2",
            "changes": {
                "text": {
                    "from": "Gives the boiling point drop with altitude",
                    "to": "States how much the boiling point drops per 300 m",
                }
            },
        }
    ]
    assert diff["unchanged"] == ["c1"]
    old = (await api.get(f"/v1/rubrics/{rid}", params={"version": 1})).json()
    assert old["version"] == 1 and old["current_version"] == 2 and len(old["criteria"]) == 3


async def test_stale_edits_conflict_and_rollback_moves_the_current_version(
    api: httpx.AsyncClient,
) -> None:
    v1 = await create(api)
    rid = v1["id"]
    body = _edit(v1, name="boil-2")
    assert (await api.put(f"/v1/rubrics/{rid}", json=body)).status_code == 200
    stale = await api.put(f"/v1/rubrics/{rid}", json={**body, "expected_version": 1})
    assert_envelope(stale, 409, "expected_version")

    rolled = await api.post(f"/v1/rubrics/{rid}/rollback", json={"to": 1, "expected_version": 2})
    assert rolled.status_code == 200, rolled.text
    assert rolled.json()["version"] == rolled.json()["current_version"] == 1
    assert rolled.json()["latest_version"] == 2 and rolled.json()["name"] == "boil"
    current = (await api.get(f"/v1/rubrics/{rid}")).json()
    assert current["version"] == 1
    versions = (await api.get(f"/v1/rubrics/{rid}/versions")).json()
    assert versions["total"] == 2 and versions["limit"] == 100 and versions["offset"] == 0
    assert [(v["version"], v["current"]) for v in versions["items"]] == [(1, True), (2, False)]
    assert [v["criteria"] for v in versions["items"]] == [3, 3]
    # an edit equal to the current version writes nothing (a retried edit is harmless) ...
    same = await api.put(f"/v1/rubrics/{rid}", json={**_edit(v1), "expected_version": 1})
    assert (same.json()["version"], same.json()["latest_version"]) == (1, 2)
    # ... and the next real edit is based on the current version and becomes version 3
    v3 = await api.put(
        f"/v1/rubrics/{rid}", json={**_edit(v1, name="boil-3"), "expected_version": 1}
    )
    assert v3.json()["version"] == 3
    missing = await api.post(f"/v1/rubrics/{rid}/rollback", json={"to": 9})
    assert_envelope(missing, 404, "to")


async def test_an_edit_cannot_mint_criterion_ids(api: httpx.AsyncClient) -> None:
    v1 = await create(api)
    body = _edit(v1)
    body["criteria"][0]["id"] = "c9"
    response = await api.put(f"/v1/rubrics/{v1['id']}", json=body)
    assert_envelope(response, 422, "criteria[0].id")


async def test_listing_filters_and_pages(api: httpx.AsyncClient) -> None:
    await create(api)
    await create(api, {**BOIL, "name": "other", "domain": "history", "source": "wiki"})
    await create(api, {**BOIL, "name": "third", "domain": "history"})
    everything = (await api.get("/v1/rubrics")).json()
    assert everything["total"] == 3 and len(everything["items"]) == 3
    assert [r["name"] for r in everything["items"]] == ["third", "other", "boil"]
    history = (await api.get("/v1/rubrics", params={"domain": "history"})).json()
    assert {r["name"] for r in history["items"]} == {"other", "third"}
    assert (await api.get("/v1/rubrics", params={"source": "wiki"})).json()["total"] == 1
    assert (await api.get("/v1/rubrics", params={"name": "boil"})).json()["total"] == 1
    page = (await api.get("/v1/rubrics", params={"limit": 1, "offset": 1})).json()
    assert page["total"] == 3 and [r["name"] for r in page["items"]] == ["other"]


@pytest.mark.parametrize(
    ("change", "param"),
    [
        ({"criteria": []}, "criteria"),
        ({"criteria": [{"text": "x", "weight": 0}]}, "criteria[0].weight"),
        ({"criteria": [{"text": "x", "weight": -1}]}, "criteria[0].weight"),
        ({"criteria": [{"text": "x", "weight": 1000}]}, "criteria[0].weight"),
        ({"criteria": [{"text": "   "}]}, "criteria[0].text"),
        ({"criteria": [{"text": ""}]}, "criteria[0].text"),
        ({"criteria": [{"text": "Names X."}, {"text": "  names   x "}]}, "criteria[1].text"),
        ({"criteria": [{"text": "x", "kind": "pitfall"}]}, "criteria"),
        ({"criteria": [{"text": "x", "kind": "bonus"}]}, "criteria[0].kind"),
        ({"criteria": [{"text": "a", "id": "c1"}, {"text": "b", "id": "c1"}]}, "criteria[1].id"),
        ({"criteria": [{"text": "x", "id": "k1"}]}, "criteria[0].id"),
        ({"criteria": [{"text": f"criterion {i}"} for i in range(51)]}, "criteria"),
        ({"name": "  "}, "name"),
        ({"colour": "blue"}, "colour"),
    ],
)
async def test_bad_rubrics_get_a_422_naming_the_field(
    api: httpx.AsyncClient, change: dict[str, Any], param: str
) -> None:
    response = await api.post("/v1/rubrics", json={**BOIL, **change})
    assert_envelope(response, 422, param)
    assert (await api.get("/v1/rubrics")).json()["total"] == 0


async def test_unknown_rubrics_and_versions_are_404(api: httpx.AsyncClient) -> None:
    rubric = await create(api)
    assert_envelope(await api.get("/v1/rubrics/rb_0000"), 404, "id")
    assert_envelope(await api.get(f"/v1/rubrics/{rubric['id']}", params={"version": 7}), 404)
    assert_envelope(await api.get(f"/v1/rubrics/{rubric['id']}/diff?from=1&to=5"), 404, "to")
    assert_envelope(await api.put("/v1/rubrics/rb_0000", json=BOIL), 404, "id")
    # Past the integer column's range: a 404 on Postgres too (was a 500; issue 23).
    assert_envelope(await api.get(f"/v1/rubrics/{rubric['id']}@99999999999"), 404)
    assert_envelope(await api.get(f"/v1/rubrics/{rubric['id']}@\u00b2"), 422, "id")


async def test_a_create_retried_with_one_idempotency_key_stores_one_rubric(
    api: httpx.AsyncClient,
) -> None:
    """Issue 23: 20 retries with one Idempotency-Key created 20 rubrics."""
    headers = {"Idempotency-Key": "create-boil-1"}
    answers = await asyncio.gather(
        *(api.post("/v1/rubrics", json=BOIL, headers=headers) for _ in range(5))
    )
    assert {r.status_code for r in answers} == {201}, [r.text for r in answers]
    assert len({r.json()["id"] for r in answers}) == 1
    assert (await api.get("/v1/rubrics")).json()["total"] == 1
    other = await api.post("/v1/rubrics", json={**BOIL, "name": "other"}, headers=headers)
    assert_envelope(other, 409, "Idempotency-Key")


async def test_jsonl_import_stores_every_line_or_none(api: httpx.AsyncClient) -> None:
    good = [json.dumps({**BOIL, "name": f"imported-{i}"}) for i in range(2)]
    response = await api.post(
        "/v1/rubrics/import",
        content="\n".join([good[0], "", good[1], ""]),
        headers={"Content-Type": "application/jsonl"},
    )
    assert response.status_code == 201, response.text
    data = response.json()
    assert data["total"] == 2
    assert [r["name"] for r in data["created"]] == ["imported-0", "imported-1"]
    assert all(r["version"] == 1 and r["criteria"][0]["id"] == "c1" for r in data["created"])

    bad = json.dumps({**BOIL, "criteria": [{"text": "x", "weight": -2}]})
    failed = await api.post("/v1/rubrics/import", content="\n".join([good[0], good[1], bad]))
    assert_envelope(failed, 422, "lines[3].criteria[0].weight")
    dup = json.dumps({**BOIL, "criteria": [{"text": "a"}, {"text": "A"}]})
    assert_envelope(
        await api.post("/v1/rubrics/import", content=dup), 422, "lines[1].criteria[1].text"
    )
    assert_envelope(await api.post("/v1/rubrics/import", content="{nope"), 422, "lines[1]")
    assert_envelope(await api.post("/v1/rubrics/import", content="\n \n"), 422, "body")
    surrogate = json.dumps({**BOIL, "criteria": [{"text": "a \ud800"}]})  # "\\ud800" escape
    assert_envelope(
        await api.post("/v1/rubrics/import", content=surrogate), 422, "lines[1].criteria[0].text"
    )
    nul = json.dumps({**BOIL, "domain": "cooking\u0000"})  # Postgres cannot store NUL
    assert_envelope(await api.post("/v1/rubrics/import", content=nul), 422, "lines[1].domain")
    assert_envelope(await api.post("/v1/rubrics", json={**BOIL, "name": "a\x00"}), 422, "name")
    strict = json.dumps({**BOIL, "criteria": [{"text": "a", "weight": True}]})
    assert_envelope(
        await api.post("/v1/rubrics/import", content=strict), 422, "lines[1].criteria[0].weight"
    )
    deep = "[" * 100_000 + "]" * 100_000  # was a RecursionError, a 500 (issue 23)
    nested = await api.post("/v1/rubrics/import", content=deep)
    assert "nested too deeply" in assert_envelope(nested, 422, "lines[1]")["message"]
    assert (await api.get("/v1/rubrics")).json()["total"] == 2


async def test_the_criteria_limit_is_a_setting(
    settings: Settings, embedder: Embedder, scripted: RubricScriptedBackend
) -> None:
    from services.app import create_app

    app = create_app(
        settings.with_overrides(rubrics_max_criteria=2), embedder=embedder, judge_backend=scripted
    )
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client,
    ):
        response = await client.post("/v1/rubrics", json=BOIL)
    error = assert_envelope(response, 422, "criteria")
    assert "limit of 2" in error["message"]


async def test_each_key_sees_its_own_rubrics(keyed: Callable[[str], httpx.AsyncClient]) -> None:
    mine, other, admin = keyed(REWARD_KEY), keyed(OTHER_KEY), keyed(ADMIN_KEY)
    rubric = await create(mine)
    rid = rubric["id"]
    assert (await mine.get(f"/v1/rubrics/{rid}")).status_code == 200
    assert_envelope(await other.get(f"/v1/rubrics/{rid}"), 404)
    assert (await other.get("/v1/rubrics")).json()["total"] == 0
    assert_envelope(await other.put(f"/v1/rubrics/{rid}", json=BOIL), 404)
    assert (await admin.get(f"/v1/rubrics/{rid}")).status_code == 200
    assert (await admin.get("/v1/rubrics")).json()["total"] == 1
    assert_envelope(await admin.post("/v1/rubrics", json=BOIL), 403)
    scored = await other.post(
        "/v1/rubrics/score", json={"rubric_id": rid, "completions": ["lower pressure"]}
    )
    assert_envelope(scored, 422, "rubric_id")
    assert_envelope(await keyed("nope").get("/v1/rubrics"), 401)


async def test_rubrics_are_artifacts_of_the_one_store(api: httpx.AsyncClient) -> None:
    """Issue 20: a rubric is the artifact named by its id; the store's listing, versions,
    diff, history and pointer moves work on it, and the rubric API sees what they did."""
    v1 = await create(api)
    rid = v1["id"]
    edited = _edit(v1, name="boil-2", note="renamed")
    assert (await api.put(f"/v1/rubrics/{rid}", json=edited)).status_code == 200

    listed = (await api.get("/v1/artifacts", params={"kind": "rubric"})).json()
    assert [a["name"] for a in listed["items"]] == [rid]
    assert listed["items"][0]["latest_version"] == 2
    first = (await api.get(f"/v1/artifacts/{rid}@1")).json()["version"]
    assert first["content"]["name"] == "boil" and first["metadata"] == {"next_criterion": 4}
    second = (await api.get(f"/v1/artifacts/{rid}@2")).json()["version"]
    assert second["metadata"]["note"] == "renamed" and second["parent_version"] == 1
    diff = (await api.get(f"/v1/artifacts/{rid}/diff", params={"from": 1, "to": 2})).json()
    assert [c["path"] for c in diff["changed"]] == ["name"] and not diff["added"]

    moved = await api.post(f"/v1/artifacts/{rid}/rollback", json={"to": 1, "note": "back"})
    assert moved.status_code == 200, moved.text
    rubric = (await api.get(f"/v1/rubrics/{rid}")).json()
    assert (rubric["version"], rubric["name"], rubric["latest_version"]) == (1, "boil", 2)
    again = await api.post(
        f"/v1/rubrics/{rid}/rollback", json={"to": 2, "expected_version": 1, "note": "fwd"}
    )
    assert again.status_code == 200 and again.json()["name"] == "boil-2"
    history = (await api.get(f"/v1/artifacts/{rid}/history")).json()
    actions = [(e["action"], e["from_version"], e["to_version"]) for e in history["items"]]
    assert actions == [("promote", 1, 2), ("rollback", 2, 1), ("create", 1, 2), ("create", None, 1)]
    # The rubric route's note is recorded with the move, as the artifact route's is; one the
    # history cannot hold whole is refused, not cut.
    assert [e["note"] for e in history["items"][:2]] == ["fwd", "back"]
    too_long = await api.post(f"/v1/rubrics/{rid}/rollback", json={"to": 1, "note": "n" * 501})
    assert_envelope(too_long, 422, param="note")
    assert (await api.get("/v1/rubrics", params={"name": "boil-2"})).json()["total"] == 1
    assert (await api.get("/v1/rubrics", params={"name": "boil"})).json()["total"] == 0
    # One timestamp format (issue 20): the rubric and its artifact answer the same moment alike.
    stamps = [rubric["created_at"], second["created_at"], history["items"][0]["created_at"]]
    assert all(t.endswith("Z") for t in stamps), stamps
