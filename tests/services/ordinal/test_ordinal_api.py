"""The ordinal service over HTTP, on the embedded default and on Postgres + Redis."""

from __future__ import annotations

import math

import httpx
import pytest


async def test_odrpo_group_matches_the_contract(client: httpx.AsyncClient) -> None:
    body = {"groups": [{"id": "g1", "scores": [1, 3, 5, 5]}], "k": 5, "estimator": "odrpo"}
    response = await client.post("/v1/ordinal/advantages", json=body)
    assert response.status_code == 200, response.text
    data = response.json()
    assert data["kind"] == "advantages" and data["estimator"] == "odrpo"
    group = data["groups"][0]
    assert group["id"] == "g1"
    s75 = math.sqrt(0.75 * 0.25) + 1e-6
    assert group["advantages"][0] == pytest.approx(2 * (-0.75 / s75) + 2 * (-0.5 / (0.5 + 1e-6)))
    assert [t["k"] for t in group["thresholds"]] == [2, 3, 4, 5]
    assert group["thresholds"][0] == {"k": 2, "pass_rate": 0.75, "active": True}


async def test_groups_keep_order_ids_and_per_group_k(client: httpx.AsyncClient) -> None:
    body = {
        "groups": [{"scores": [1, 2]}, {"id": "b", "scores": [3, 3, 3], "k": 3}, {"scores": [4]}],
        "k": 10,
        "estimator": "grpo",
    }
    response = await client.post("/v1/ordinal/advantages", json=body)
    assert response.status_code == 200, response.text
    groups = response.json()["groups"]
    assert [g["id"] for g in groups] == ["g0", "b", "g2"]
    assert groups[1]["advantages"] == [0.0, 0.0, 0.0]
    assert groups[2]["advantages"] == [0.0]
    assert groups[0]["thresholds"] is None


@pytest.mark.parametrize("estimator", ["odrpo", "grpo", "maxrl", "dr_grpo"])
async def test_every_estimator_answers_without_nan(
    client: httpx.AsyncClient, estimator: str
) -> None:
    body = {
        "groups": [{"scores": [2, 2, 2]}, {"scores": [1, 4, 2, 3]}],
        "k": 4,
        "estimator": estimator,
    }
    response = await client.post("/v1/ordinal/advantages", json=body)
    assert response.status_code == 200, response.text
    first, second = response.json()["groups"]
    assert first["advantages"] == [0.0, 0.0, 0.0]
    assert all(math.isfinite(a) for a in second["advantages"])
    assert sum(second["advantages"]) == pytest.approx(0.0, abs=1e-9) or estimator == "odrpo"


async def test_unscaled_odrpo_equals_dr_grpo_over_http(client: httpx.AsyncClient) -> None:
    groups = [{"scores": [1, 7, 3, 3, 10, 2]}, {"scores": [5, 5, 6, 9]}]
    odrpo = await client.post(
        "/v1/ordinal/advantages", json={"groups": groups, "k": 10, "step_scaling": "none"}
    )
    dr = await client.post(
        "/v1/ordinal/advantages", json={"groups": groups, "k": 10, "estimator": "dr_grpo"}
    )
    for a, b in zip(odrpo.json()["groups"], dr.json()["groups"], strict=True):
        assert a["advantages"] == pytest.approx(b["advantages"])


async def test_bin_edges_map_non_integer_scores(client: httpx.AsyncClient) -> None:
    body = {"groups": [{"scores": [0.1, 0.5, 0.95, 0.7]}], "bin_edges": [0.25, 0.5, 0.75]}
    response = await client.post("/v1/ordinal/advantages", json=body)
    assert response.status_code == 200, response.text
    group = response.json()["groups"][0]
    assert group["levels"] == [1, 3, 4, 2 + 1]
    assert len(group["thresholds"]) == 3


async def test_threshold_weights_and_normalization(client: httpx.AsyncClient) -> None:
    base = {"groups": [{"scores": [1, 3, 5, 5]}], "k": 5, "step_scaling": "none"}
    weighted = await client.post(
        "/v1/ordinal/advantages", json={**base, "threshold_weights": [1, 0, 0, 0]}
    )
    assert weighted.json()["groups"][0]["advantages"] == pytest.approx([-0.75, 0.25, 0.25, 0.25])
    normalized = await client.post(
        "/v1/ordinal/advantages", json={**base, "normalize_thresholds": True}
    )
    plain = await client.post("/v1/ordinal/advantages", json=base)
    n = normalized.json()["groups"][0]["advantages"]
    p = plain.json()["groups"][0]["advantages"]
    assert n == pytest.approx([x / 4 for x in p])


async def test_decompose_matches_the_contract(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/ordinal/decompose", json={"scores": [1, 3, 5], "k": 5})
    assert response.status_code == 200
    assert response.json()["indicators"] == [[0, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 1]]
