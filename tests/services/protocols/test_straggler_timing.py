"""A straggler's neutral value does not depend on timing (issue 22): one that reaches its
deadline while its group is still being scored waits for the group and takes its mean, as one
arriving after the group was scored does (scripted judge, slowed down; real MiniLM)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from tests.services.judge.scripted import ScriptedBackend

PROMPT = "Name a colour."
SPEC = json.dumps({"channels": {"judge_scale": {"k": 5}, "diversity": {"weight": 0.5}}})


async def _reward(client: httpx.AsyncClient, body: dict[str, Any], **params: Any) -> dict[str, Any]:
    response = await client.post("/slime/reward", json=body, params=params)
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()
    return data


async def test_a_straggler_of_a_group_still_being_scored_gets_the_groups_mean(
    rewards_client: httpx.AsyncClient, scripted: ScriptedBackend
) -> None:
    scripted.delay = 1.0  # each judge call: the group is scored for at least a second
    params = {"spec": SPEC, "group_size": 3, "wait_s": 30}
    group = [
        asyncio.ensure_future(_reward(rewards_client, {"prompt": PROMPT, "response": r}, **params))
        for r in ["GOOD red", "blue", "a dog"]
    ]
    while not scripted.in_flight:  # the group is complete and its judge call has begun
        await asyncio.sleep(0.01)
    late = await _reward(
        rewards_client, {"prompt": PROMPT, "response": "GOOD green"}, **{**params, "wait_s": 0.05}
    )
    answers = await asyncio.gather(*group)
    mean_diversity = sum(a["channels"]["diversity"] for a in answers) / 3
    assert late["status"] == "group_too_small" and late["failed"] is False
    assert late["channels"]["diversity"] == pytest.approx(mean_diversity), "not the midpoint"
    assert mean_diversity != pytest.approx(0.5)
