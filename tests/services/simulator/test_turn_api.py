"""``POST /v1/simulator/turn`` on the embedded default: the real SmolLM2-135M (the judge's
backend, shared) writes the user's turn and rates the last assistant turn; bad input is a
clear 422 before any model work."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.conftest import assert_envelope

GOAL = "You want a cheap hotel in the north of town for two nights."
DIALOGUE = [
    {"role": "user", "content": "Hi, I am looking for a hotel."},
    {"role": "assistant", "content": "Sure. Which part of town, and what is your budget?"},
]


@pytest.fixture
def app_overrides() -> dict[str, Any]:
    return {"simulator_max_messages": 4}


async def test_a_turn_answers_the_user_and_rates_the_assistant(client: httpx.AsyncClient) -> None:
    body = {"goal": GOAL, "messages": DIALOGUE, "temperature": 0.7, "seed": 3, "max_new_tokens": 24}
    response = await client.post("/v1/simulator/turn", json=body)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["message"]["role"] == "user" and answer["message"]["content"].strip()
    assert isinstance(answer["done"], bool) and answer["calibration"] is None
    assert answer["model"].startswith("SmolLM2-135M")
    satisfaction = answer["satisfaction"]
    assert satisfaction["source"] == "prompted" and len(satisfaction["distribution"]) == 5
    assert sum(satisfaction["distribution"]) == pytest.approx(1, abs=1e-3)
    expected = sum((k + 1) * p for k, p in enumerate(satisfaction["distribution"]))
    assert satisfaction["expected"] == pytest.approx(expected, abs=1e-3)
    again = await client.post("/v1/simulator/turn", json=body)
    assert again.json()["message"] == answer["message"], "a seed makes the sample reproducible"


async def test_the_opening_turn_has_nothing_to_rate(client: httpx.AsyncClient) -> None:
    body = {"goal": GOAL, "messages": [], "temperature": 0, "max_new_tokens": 24}
    response = await client.post("/v1/simulator/turn", json=body)
    assert response.status_code == 200, response.text
    assert response.json()["satisfaction"] is None
    assert response.json()["message"]["content"]


@pytest.mark.parametrize(
    ("change", "param", "words"),
    [
        ({"goal": ""}, "goal", "at least 1"),
        ({"goal": "   "}, "goal", "blank"),
        ({"messages": [{"role": "system", "content": "x"}, *DIALOGUE]}, "messages", "'system'"),
        ({"messages": DIALOGUE[:1]}, "messages", "last message must be the assistant"),
        ({"messages": DIALOGUE * 3}, "messages", "at most 4"),
        ({"temperature": 2.5}, "temperature", "less than or equal to 2"),
        ({"calibration": "uss@7"}, "calibration", "no calibration 'uss@7'"),
        ({"calibration": "not a ref!"}, "calibration", ""),
    ],
)
async def test_bad_input_is_a_clear_422(
    client: httpx.AsyncClient, change: dict[str, Any], param: str, words: str
) -> None:
    body = {"goal": GOAL, "messages": DIALOGUE, **change}
    response = await client.post("/v1/simulator/turn", json=body)
    error = assert_envelope(response, 422)
    assert param in (error["param"] or ""), error
    assert words in error["message"], error
