"""Composite rewards on the real models: SmolLM2-135M-Instruct grades, MiniLM diversity."""

from __future__ import annotations

import math

import httpx
import pytest

pytestmark = pytest.mark.slow


async def test_diversity_and_judge_scale_on_the_real_models(client: httpx.AsyncClient) -> None:
    body = {
        "prompt": "What is the capital of France?",
        "completions": [
            "Paris.",
            "The capital of France is Paris.",
            "Berlin.",
            "I like turtles.",
        ],
        "run_id": "real-run",
        "step": 0,
        "spec": {
            "channels": {"diversity": {"weight": 0.5}, "judge_scale": {"weight": 1.0, "k": 5}},
            "advantage": "grpo",
        },
    }
    response = await client.post("/v1/rewards/group", json=body)
    assert response.status_code == 200, response.text
    data = response.json()
    assert data["kind"] == "advantages" and len(data["results"]) == 4
    for result in data["results"]:
        assert result["status"] == "ok"
        scale, div = result["channels"]["judge_scale"], result["channels"]["diversity"]
        assert scale["status"] == div["status"] == "ok"
        assert 1.0 <= scale["value"] <= 5.0 and 0.0 <= div["value"] <= 1.0
        assert sum(scale["detail"]["distribution"]) == pytest.approx(1.0)
        assert result["total"] == pytest.approx(scale["value"] + 0.5 * div["value"])
        assert math.isfinite(result["advantage"])
        assert "SmolLM2" in scale["meta"]["model"] and scale["meta"]["template"] == "scale@2"
        assert "MiniLM" in div["meta"]["embedder"]
    assert sum(r["advantage"] for r in data["results"]) == pytest.approx(0.0, abs=1e-6)
    assert data["stats"]["ok"] == 4 and data["stats"]["std"] > 0
    stored = (await client.get("/v1/runs/real-run/groups")).json()["items"]
    assert [g["result"]["spec_hash"] for g in stored] == [data["spec_hash"]]


async def test_an_empty_completion_gets_the_floor_flagged_not_a_judged_grade(
    client: httpx.AsyncClient,
) -> None:
    """An EOS-only response decodes to no text; the 135M judge graded such answers among the
    highest of their group (issue 22). It is not sent to the judge: grade 1, status ``empty``,
    with a total (it is a bad answer, not an unscored one)."""
    body = {
        "prompt": "What is the capital of France?",
        "completions": ["", "The capital of France is Paris.", " \n", "Paris."],
        "spec": {"channels": {"judge_scale": {"k": 5}}, "advantage": "grpo"},
    }
    response = await client.post("/v1/rewards/group", json=body)
    assert response.status_code == 200, response.text
    results = response.json()["results"]
    empty, judged = [results[0], results[2]], [results[1], results[3]]
    for result in empty:
        scale = result["channels"]["judge_scale"]
        assert (result["status"], scale["status"]) == ("empty", "empty")
        assert scale["value"] == result["total"] == 1.0
        assert scale["detail"] == {"mode": 1, "distribution": [1.0, 0.0, 0.0, 0.0, 0.0]}
        assert result["advantage"] < 0
    for result in judged:
        assert result["status"] == "ok" and result["total"] > 1.0
    assert max(r["advantage"] for r in empty) < min(r["advantage"] for r in judged)
