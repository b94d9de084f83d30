"""The judge endpoints on the real embedded judge (SmolLM2-135M-Instruct, local backend)."""

from __future__ import annotations

import json

import httpx
import pytest

pytestmark = pytest.mark.slow

QUESTION = "What is the capital of France?"


async def test_pairwise_logprob_on_the_real_model(client: httpx.AsyncClient) -> None:
    body = {
        "prompt": QUESTION,
        "response_a": "Paris.",
        "response_b": "I like turtles.",
        "cache": False,
    }
    response = await client.post("/v1/judge/pairwise", json=body)
    assert response.status_code == 200, response.text
    data = response.json()
    assert data["status"] == "ok" and data["winner"] in ("a", "b", "tie")
    p_ab, p_ba = (o["p_first"] for o in data["orders"])
    assert 0 < p_ab < 1 and 0 < p_ba < 1
    assert data["p_a"] == pytest.approx((p_ab + 1 - p_ba) / 2)
    assert data["judge"]["backend"] == "local-transformers"
    assert "SmolLM2" in data["judge"]["model"]
    again = (await client.post("/v1/judge/pairwise", json=body)).json()
    assert again["p_a"] == pytest.approx(data["p_a"], abs=1e-4), "deterministic"


async def test_group_round_robin_on_the_real_model(client: httpx.AsyncClient) -> None:
    body = {
        "prompt": [{"role": "user", "content": QUESTION}],
        "completions": ["Paris.", "Berlin.", "The capital of France is Paris.", "No idea."],
        "pairing": "round_robin",
        "scoring": "bradley_terry",
    }
    data = (await client.post("/v1/judge/group", json=body)).json()
    assert len(data["pairs"]) == 6 and all(p["status"] == "ok" for p in data["pairs"])
    assert all(isinstance(r, float) for r in data["rewards"])
    assert 0.0 <= data["inconsistency_rate"] <= 1.0


async def test_scale_on_the_real_model(client: httpx.AsyncClient) -> None:
    body = {
        "prompt": QUESTION,
        "completions": ["Paris.", "Madrid is the capital of France."],
        "k": 5,
    }
    data = (await client.post("/v1/judge/scale", json=body)).json()
    for result in data["results"]:
        assert result["status"] == "ok"
        assert sum(result["distribution"]) == pytest.approx(1.0)
        assert 1.0 <= result["expected"] <= 5.0 and 1 <= result["mode"] <= 5
    assert data["results"][0]["distribution"] != data["results"][1]["distribution"]


async def test_generate_mode_on_the_real_model(client: httpx.AsyncClient) -> None:
    body = {
        "prompt": QUESTION,
        "response_a": "Paris.",
        "response_b": "Rome.",
        "mode": "generate",
        "max_new_tokens": 48,
    }
    data = (await client.post("/v1/judge/pairwise", json=body)).json()
    assert data["status"] == "ok" and data["judge"]["template"] == "pairwise_json@2", data
    assert all(o["reply"] for o in data["orders"]), "the generated replies are returned"
    assert {o["verdict_source"] for o in data["orders"]} == {"structured"}, "no fallback needed"
    assert all(json.loads(o["reply"])["verdict"] in ("A", "B", "tie") for o in data["orders"])
    assert 0.0 <= data["p_a"] <= 1.0
    text = {**body, "template": "pairwise_generate@1"}
    data = (await client.post("/v1/judge/pairwise", json=text)).json()
    assert data["status"] == "ok", "a reply without a verdict line gets its letter scored"
    assert {o["verdict_source"] for o in data["orders"]} <= {"parsed", "scored"}
