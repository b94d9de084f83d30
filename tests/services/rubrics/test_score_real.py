"""Rubric scoring on the real SmolLM2-135M judge (local transformers backend), through the API
on SQLite and on Postgres: well-formed probabilities, statuses and stamps (not content: a
135M judge's verdicts are not a quality claim)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

pytestmark = pytest.mark.slow

RUBRIC = {
    "name": "boil-real",
    "question": "Why does water boil at a lower temperature on a mountain?",
    "reference_answer": "Because the air pressure is lower at altitude.",
    "criteria": [
        {"text": "Says that the air pressure is lower at altitude", "weight": 2},
        {"text": "Claims that the water is colder", "weight": 1, "kind": "pitfall"},
    ],
}
COMPLETIONS = ["The air pressure is lower up high, so water boils sooner.", "Because it is cold."]


async def _score(client: httpx.AsyncClient, **body: Any) -> dict[str, Any]:
    created = await client.post("/v1/rubrics", json=RUBRIC)
    assert created.status_code == 201, created.text
    response = await client.post(
        "/v1/rubrics/score",
        json={"rubric_id": created.json()["id"], "completions": COMPLETIONS, **body},
    )
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()
    assert data["judge"]["backend"] == "local-transformers"
    assert "SmolLM2" in data["judge"]["model"]
    assert data["rubric"]["version"] == 1 and data["rubric"]["name"] == "boil-real"
    return data


async def test_logprob_mode_on_the_real_judge(client: httpx.AsyncClient) -> None:
    data = await _score(client, show_reference=True)
    assert data["judge"]["template"] == "rubric_criterion_reference@2"
    for result in data["results"]:
        assert result["status"] == "ok"
        ps = [criterion["p"] for criterion in result["criteria"]]
        assert all(0.0 < p < 1.0 for p in ps), ps
        assert all(0.0 < c["coverage"] <= 1.0 for c in result["criteria"])
        assert result["reward"] == pytest.approx((2 * ps[0] - ps[1]) / 2)
        assert -0.5 <= result["reward"] <= 1.0
    assert all(0.0 < rate < 1.0 for rate in data["pass_rates"].values())


async def test_implicit_mode_on_the_real_judge(client: httpx.AsyncClient) -> None:
    data = await _score(client, mode="implicit")
    assert data["judge"]["template"] == "rubric_implicit@2"
    for result in data["results"]:
        assert result["status"] == "ok"
        assert len(result["distribution"]) == 10
        assert sum(result["distribution"]) == pytest.approx(1.0)
        assert all(0.0 < p < 1.0 for p in result["distribution"])
        assert 1.0 < result["grade"] < 10.0
        assert result["reward"] == pytest.approx((result["grade"] - 1) / 9)
