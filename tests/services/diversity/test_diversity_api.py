"""The diversity service over HTTP with the real bundled MiniLM embedder."""

from __future__ import annotations

import asyncio

import httpx
import pytest

TEXTS = [
    "The mitochondria is the powerhouse of the cell.",
    "Mitochondria produce most of the cell's energy supply.",
    "Paris is the capital of France and sits on the Seine.",
    "To reverse a list in Python, call list.reverse() or use slicing [::-1].",
]


async def test_centroid_minmax_rewards(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/diversity/group", json={"completions": TEXTS})
    assert response.status_code == 200, response.text
    data = response.json()
    rewards = data["rewards"]
    assert data["kind"] == "rewards"
    assert min(rewards) == 0.0 and max(rewards) == pytest.approx(1.0)
    # The two mitochondria answers are the least unusual of the group.
    assert max(rewards[0], rewards[1]) < max(rewards[2], rewards[3])
    assert [r["id"] for r in data["results"]] == ["c0", "c1", "c2", "c3"]
    assert data["embedder"] == "sentence-transformers/all-MiniLM-L6-v2"
    stats = data["stats"]
    assert 0.0 < stats["mean_pairwise_cosine_distance"] < 2.0
    assert 0.0 < stats["distinct_1"] <= 1.0 and 0.0 < stats["distinct_2"] <= 1.0


async def test_ids_echo_and_weight(client: httpx.AsyncClient) -> None:
    completions = [{"id": f"r{i}", "text": t} for i, t in enumerate(TEXTS)]
    body = {
        "completions": completions,
        "metric": "pairwise_cosine",
        "scaling": "none",
        "weight": 0.5,
    }
    response = await client.post("/v1/diversity/group", json=body)
    data = response.json()
    assert [r["id"] for r in data["results"]] == ["r0", "r1", "r2", "r3"]
    for result in data["results"]:
        assert result["reward"] == pytest.approx(0.5 * result["distance"])
        assert result["status"] == "ok"


@pytest.mark.parametrize("scaling", ["minmax", "none"])
async def test_identical_completions(client: httpx.AsyncClient, scaling: str) -> None:
    body = {"completions": ["same answer"] * 4, "scaling": scaling}
    response = await client.post("/v1/diversity/group", json=body)
    assert response.status_code == 200, response.text
    data = response.json()
    assert data["rewards"] == [0.0, 0.0, 0.0, 0.0]
    if scaling == "minmax":
        assert data["separable"] is False and "min_range" in data["note"]
    else:
        assert data["separable"] is True and data["note"] is None


async def test_two_completions_with_the_centroid_say_they_cannot_be_separated(
    client: httpx.AsyncClient,
) -> None:
    """Issue 10: with G=2 both centroid distances are equal, so min-max gives [0, 0]; the
    answer says so instead of returning silent zeros, and names what works."""
    body = {"completions": ["Paris is the capital.", "I like turtles."]}
    data = (await client.post("/v1/diversity/group", json=body)).json()
    assert data["rewards"] == [0.0, 0.0]
    assert data["separable"] is False and "pairwise_cosine" in data["note"]
    pairwise = {**body, "metric": "pairwise_cosine", "scaling": "none"}
    data = (await client.post("/v1/diversity/group", json=pairwise)).json()
    assert data["separable"] is True and data["rewards"][0] > 0
    assert (await client.post("/v1/diversity/group", json={"completions": TEXTS})).json()[
        "separable"
    ] is True


async def test_batch_endpoint_equals_single_requests(client: httpx.AsyncClient) -> None:
    groups = [{"id": "a", "completions": TEXTS[:3]}, {"id": "b", "completions": TEXTS[1:]}]
    batch = await client.post("/v1/diversity/groups", json={"groups": groups})
    assert batch.status_code == 200, batch.text
    singles = await asyncio.gather(*(client.post("/v1/diversity/group", json=g) for g in groups))
    for out, single in zip(batch.json()["groups"], singles, strict=True):
        assert out["id"] == single.json()["id"]
        assert out["rewards"] == pytest.approx(single.json()["rewards"], abs=1e-5)


async def test_concurrent_requests_share_model_batches(client: httpx.AsyncClient) -> None:
    groups = [[f"answer {i} variant {j} about topic {i * j}" for j in range(4)] for i in range(16)]
    results = await asyncio.gather(
        *(client.post("/v1/diversity/group", json={"completions": g}) for g in groups)
    )
    assert all(r.status_code == 200 for r in results)
    metrics = (await client.get("/metrics")).text
    count = _sample(metrics, 'plaudit_model_batch_requests_count{model="embedder"}')
    total = _sample(metrics, 'plaudit_model_batch_requests_sum{model="embedder"}')
    assert total == 16
    assert count < 16, "16 concurrent requests should have shared model calls"


def _sample(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name):
            return float(line.split()[-1])
    raise AssertionError(f"{name} not in metrics")
