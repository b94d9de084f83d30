"""Named, versioned reward specs: save, score by name or name@N, stamped on stored groups."""

from __future__ import annotations

import httpx

from tests.conftest import assert_envelope

DIVERSITY = {"channels": {"diversity": {"weight": 1.0}}}
HALF = {"channels": {"diversity": {"weight": 0.5}}}
GROUP = {"prompt": "Name a colour.", "completions": ["red", "a deep ocean blue", "green"]}


async def test_save_score_by_name_and_version_and_audit(rewards_client: httpx.AsyncClient) -> None:
    first = await rewards_client.post("/v1/rewards/specs", json={"name": "div", "spec": DIVERSITY})
    assert first.status_code == 201
    saved = first.json()
    assert (saved["name"], saved["version"], saved["created"]) == ("div", 1, True)
    assert saved["spec"]["channels"]["diversity"]["metric"] == "centroid"  # defaults filled
    second = await rewards_client.post(
        "/v1/rewards/specs", json={"name": "div", "spec": HALF, "expected_version": 1}
    )
    assert second.json()["version"] == 2
    stale = await rewards_client.post(
        "/v1/rewards/specs", json={"name": "div", "spec": DIVERSITY, "expected_version": 1}
    )
    assert_envelope(stale, 409, "expected_version")

    body = {**GROUP, "run_id": "named-run", "step": 1}
    current = (await rewards_client.post("/v1/rewards/group", json={**body, "spec": "div"})).json()
    pinned = (await rewards_client.post("/v1/rewards/group", json={**body, "spec": "div@1"})).json()
    inline = (
        await rewards_client.post("/v1/rewards/group", json={**body, "spec": DIVERSITY})
    ).json()
    assert (current["spec_name"], current["spec_version"]) == ("div", 2)
    assert (pinned["spec_name"], pinned["spec_version"]) == ("div", 1)
    assert inline["spec_name"] is None and inline["spec_hash"] == pinned["spec_hash"]
    assert [r["total"] for r in current["results"]] == [0.5 * r["total"] for r in pinned["results"]]

    stored = (await rewards_client.get("/v1/runs/named-run/groups")).json()["items"]
    assert [(g["spec_name"], g["spec_version"]) for g in stored] == [
        ("div", 2),
        ("div", 1),
        (None, None),
    ]
    runs = (await rewards_client.get("/v1/runs")).json()["items"]
    uses = next(r for r in runs if r["run_id"] == "named-run")["specs"]
    assert {(u["name"], u["version"]) for u in uses} == {("div", 2), ("div", 1), (None, None)}

    versions = (await rewards_client.get("/v1/rewards/specs/div/versions")).json()
    assert [v["version"] for v in versions["items"]] == [2, 1] and versions["total"] == 2
    assert (await rewards_client.get("/v1/rewards/specs/div@1")).json()["spec"] == saved["spec"]
    listing = (await rewards_client.get("/v1/rewards/specs")).json()
    assert [(s["name"], s["version"]) for s in listing["items"]] == [("div", 2)]


async def test_bad_named_specs_are_422(rewards_client: httpx.AsyncClient) -> None:
    unknown = await rewards_client.post("/v1/rewards/group", json={**GROUP, "spec": "nope"})
    assert_envelope(unknown, 422, "spec")
    malformed = await rewards_client.post("/v1/rewards/group", json={**GROUP, "spec": "a@x"})
    assert_envelope(malformed, 422, "spec")
    bad = await rewards_client.post(
        "/v1/rewards/specs", json={"name": "x", "spec": {"channels": {"nope": {}}}}
    )
    assert_envelope(bad, 422, "spec.channels.nope")
    assert_envelope(
        await rewards_client.post("/v1/rewards/specs", json={"name": "../x", "spec": DIVERSITY}),
        422,
        "name",
    )
