"""Scored groups are stored per run; retries with an Idempotency-Key are replayed, not redone."""

from __future__ import annotations

from datetime import datetime, timedelta

import httpx

from tests.conftest import assert_envelope

BODY = {"groups": [{"id": "g1", "scores": [1, 2, 3]}], "k": 3, "run_id": "run-a", "step": 2}


async def test_groups_are_listed_per_run(client: httpx.AsyncClient) -> None:
    await client.post("/v1/ordinal/advantages", json=BODY)
    await client.post("/v1/ordinal/advantages", json={**BODY, "step": 3})
    await client.post("/v1/ordinal/advantages", json={**BODY, "run_id": "run-b"})
    await client.post(
        "/v1/diversity/group",
        json={"completions": ["a", "b c"], "run_id": "run-a", "step": 3, "id": "d1"},
    )
    page = (await client.get("/v1/runs/run-a/groups")).json()
    assert [(g["service"], g["step"]) for g in page["items"]] == [
        ("ordinal", 2),
        ("ordinal", 3),
        ("diversity", 3),
    ]
    stored = page["items"][0]["result"]
    assert stored["estimator"] == "odrpo" and stored["levels"] == [1, 2, 3]
    step3 = (await client.get("/v1/runs/run-a/groups", params={"step": 3})).json()
    assert {g["group_id"] for g in step3["items"]} == {"g1", "d1"}
    first = (await client.get("/v1/runs/run-a/groups", params={"limit": 2})).json()
    assert len(first["items"]) == 2 and first["total"] == 3 and first["limit"] == 2
    assert (await client.get("/v1/runs/nobody/groups")).json()["items"] == []
    listing = (await client.get("/v1/runs")).json()
    run_a = next(r for r in listing["items"] if r["run_id"] == "run-a")
    assert (run_a["groups"], run_a["first_step"], run_a["last_step"]) == (3, 2, 3)
    assert run_a["services"] == ["diversity", "ordinal"]
    assert listing["total"] == len(listing["items"]) == 2
    # Times carry their zone on both set-ups (issue 20: SQLite's came back without one), in
    # the API's one format, UTC written with Z (as pydantic writes the artifacts' times).
    stamps = [run_a["first_at"], run_a["last_at"], page["items"][0]["created_at"]]
    assert all(datetime.fromisoformat(t).utcoffset() == timedelta(0) for t in stamps), stamps
    assert all(t.endswith("Z") for t in stamps), stamps


async def test_a_retry_with_the_same_key_is_replayed(client: httpx.AsyncClient) -> None:
    headers = {"Idempotency-Key": "step-2-group-1"}
    first = await client.post("/v1/ordinal/advantages", json=BODY, headers=headers)
    second = await client.post("/v1/ordinal/advantages", json=BODY, headers=headers)
    assert first.status_code == second.status_code == 200
    assert first.json() == second.json()
    stored = (await client.get("/v1/runs/run-a/groups")).json()["items"]
    assert len(stored) == 1, "a retried group must not be stored twice"


async def test_a_reused_key_with_another_body_is_a_conflict(client: httpx.AsyncClient) -> None:
    headers = {"Idempotency-Key": "k-1"}
    await client.post("/v1/ordinal/advantages", json=BODY, headers=headers)
    other = {**BODY, "groups": [{"scores": [3, 2, 1]}]}
    response = await client.post("/v1/ordinal/advantages", json=other, headers=headers)
    assert assert_envelope(response, 409, "Idempotency-Key")["type"] == "conflict"


async def test_diversity_retries_are_replayed(client: httpx.AsyncClient) -> None:
    body = {"completions": ["x y", "z"], "run_id": "run-d"}
    headers = {"Idempotency-Key": "div-1"}
    a = await client.post("/v1/diversity/group", json=body, headers=headers)
    b = await client.post("/v1/diversity/group", json=body, headers=headers)
    assert a.json() == b.json()
    assert len((await client.get("/v1/runs/run-d/groups")).json()["items"]) == 1


async def test_a_run_id_with_a_slash_can_be_listed(client: httpx.AsyncClient) -> None:
    await client.post("/v1/ordinal/advantages", json={**BODY, "run_id": "team/run-7"})
    for path in ("/v1/runs/team/run-7/groups", "/v1/runs/team%2Frun-7/groups"):
        page = (await client.get(path)).json()
        assert [g["run_id"] for g in page["items"]] == ["team/run-7"], path
