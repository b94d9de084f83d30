"""The OpenAPI schema shows the reward spec with every channel's options, built from the
channel registry of the started server (issue 20: ``spec: Any`` hid them), and what it says
agrees with what the server accepts."""

from __future__ import annotations

from typing import Any

import httpx
import jsonschema
import pytest
from fastapi import FastAPI

from tests.services.judge.scripted import ScriptedBackend

GOOD = [
    {"channels": {"judge_scale": {"k": 5, "weight": 0.5}}, "advantage": "odrpo"},
    {"channels": {"diversity": {}, "judge_pairwise": {"pairing": "round_robin"}}},
    "helpful@2",
]
BAD = [
    {"channels": {"nope": {}}},
    {"channels": {"judge_scale": {"k": 1}}},
    {"channels": {"judge_scale": {"kk": 5}}},
    {"channels": {"diversity": {"weight": -1}}},
    {"channels": {}},
    {"channels": {"diversity": {}}, "advantage": "ppo"},
    {"channels": {"diversity": {}}, "extra": 1},
    "helpful@0",
]


@pytest.fixture
def judge_backend() -> ScriptedBackend:
    """The conftest app with the scripted judge: no model to load for a schema."""
    return ScriptedBackend()


def _spec_field(schema: dict[str, Any], model: str) -> dict[str, Any]:
    field: dict[str, Any] = schema["components"]["schemas"][model]["properties"]["spec"]
    return {**field, "components": schema["components"]}


async def test_every_served_channel_and_its_options_are_in_the_schema(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    schema = (await client.get("/openapi.json")).json()
    channels = schema["components"]["schemas"]["RewardSpec"]["properties"]["channels"]
    served = app.state.resources.channels.names()
    assert sorted(channels["properties"]) == served
    assert {"judge_scale", "diversity", "karma", "rubric"} <= set(served)
    assert channels["properties"]["judge_scale"]["properties"]["k"]["minimum"] == 2
    for model in ("RewardsGroupRequest", "SpecSaveRequest", "RescoreRequest"):
        field = _spec_field(schema, model)
        for spec in GOOD:
            jsonschema.validate(spec, field)
        for spec in BAD:
            with pytest.raises(jsonschema.ValidationError):
                jsonschema.validate(spec, field)


async def test_the_server_refuses_what_the_schema_refuses(client: httpx.AsyncClient) -> None:
    for spec in BAD:
        body = {"prompt": "Q?", "completions": ["a", "b"], "spec": spec}
        answer = await client.post("/v1/rewards/group", json=body)
        assert answer.status_code == 422, (spec, answer.text)
