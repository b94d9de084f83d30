"""Reward specs: the 422 table, the validate dry run and the spec hash."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.channels import check, resolve
from tests.conftest import assert_envelope

COMPLETIONS = ["GOOD one", "two", "three"]


def _body(spec: Any, completions: list[str] = COMPLETIONS) -> dict[str, Any]:
    return {"prompt": "Q?", "completions": completions, "spec": spec}


BAD_SPECS = [
    ({"channels": {"foo": {}}}, "spec.channels.foo", "unknown channel"),
    ({"channels": {"rubric": {"mode": "vibes"}}}, "spec.channels.rubric.mode", "logprob"),
    ({"channels": {"karma": {"model": "karma@x"}}}, "spec.channels.karma.model", "karma@x"),
    ({"channels": {"diversity": {"weight": -1}}}, "spec.channels.diversity.weight", "0"),
    ({"channels": {"diversity": {"wieght": 1}}}, "spec.channels.diversity.wieght", "option"),
    ({"channels": {"diversity": 1.0}}, "spec.channels.diversity", "object"),
    ({"channels": {"judge_scale": {"k": 1}}}, "spec.channels.judge_scale.k", "2"),
    (
        {"channels": {"judge_scale": {"template": "nope@1"}}},
        "spec.channels.judge_scale.template",
        "unknown template",
    ),
    (
        {"channels": {"judge_pairwise": {"mode": "generate", "template": "scale@1"}}},
        "spec.channels.judge_pairwise.template",
        "generate",
    ),
    (
        {"channels": {"judge_pairwise": {"pairing": "anchor"}}},
        "spec.channels.judge_pairwise.pairing",
        "adjacent",
    ),
    ({"channels": {}}, "spec.channels", "non-empty"),
    ({"advantage": "grpo"}, "spec.channels", "required"),
    ({"channels": {"diversity": {}}, "advantage": "ppo"}, "spec.advantage", "one of"),
    ({"channels": {"diversity": {}}, "advantage": "odrpo"}, "spec.advantage", "judge_scale"),
    ({"channels": {"diversity": {}}, "extra": 1}, "spec.extra", "unknown field"),
    ([1, 2], "spec", "object"),
]


@pytest.mark.parametrize(("spec", "param", "words"), BAD_SPECS)
async def test_bad_specs_are_422_naming_the_field(
    rewards_client: httpx.AsyncClient, spec: Any, param: str, words: str
) -> None:
    response = await rewards_client.post("/v1/rewards/group", json=_body(spec))
    error = assert_envelope(response, 422, param)
    assert words in error["message"] and error["type"] == "invalid_request"


@pytest.mark.parametrize("weight", ["NaN", "Infinity", "-Infinity"])
async def test_non_finite_weights_are_422(rewards_client: httpx.AsyncClient, weight: str) -> None:
    raw = json.dumps(_body({"channels": {"diversity": {"weight": 1.0}}}))
    raw = raw.replace('"weight": 1.0', f'"weight": {weight}')
    response = await rewards_client.post(
        "/v1/rewards/group", content=raw, headers={"content-type": "application/json"}
    )
    assert_envelope(response, 422, "spec.channels.diversity.weight")


async def test_request_level_mistakes_are_422(rewards_client: httpx.AsyncClient) -> None:
    spec: dict[str, Any] = {"channels": {"diversity": {}}}
    one = await rewards_client.post("/v1/rewards/group", json=_body(spec, ["alone"]))
    assert "at least 2" in assert_envelope(one, 422, "completions")["message"]
    short = {**_body(spec), "token_counts": [1, 2]}
    assert_envelope(await rewards_client.post("/v1/rewards/group", json=short), 422)
    typo = {**_body(spec), "finish_reason": ["stop"] * 3}
    assert_envelope(await rewards_client.post("/v1/rewards/group", json=typo), 422)


async def test_validate_returns_the_resolved_spec(rewards_client: httpx.AsyncClient) -> None:
    spec = {"channels": {"judge_scale": {"k": 5}, "diversity": {"weight": 0.5}}}
    data = (await rewards_client.post("/v1/rewards/validate", json={"spec": spec})).json()
    assert data["valid"] is True and data["errors"] == []
    assert data["spec"] == {
        "channels": {
            "diversity": {
                "weight": 0.5,
                "metric": "centroid",
                "scaling": "minmax",
                "min_range": 1e-6,
            },
            "judge_scale": {"weight": 1.0, "k": 5, "criteria": None, "template": "scale@2"},
        },
        "advantage": "none",
    }
    assert len(data["spec_hash"]) == 64


async def test_validate_lists_every_error_with_200(rewards_client: httpx.AsyncClient) -> None:
    spec = {"channels": {"foo": {}, "diversity": {"weight": -2, "colour": 1}}, "advantage": "x"}
    response = await rewards_client.post("/v1/rewards/validate", json={"spec": spec})
    assert response.status_code == 200
    data = response.json()
    assert data["valid"] is False and data["spec"] is None and data["spec_hash"] is None
    assert {e["param"] for e in data["errors"]} == {
        "spec.advantage",
        "spec.channels.foo",
        "spec.channels.diversity.weight",
        "spec.channels.diversity.colour",
    }
    assert all(e["message"] for e in data["errors"])


async def test_the_same_spec_in_any_key_order_has_one_hash(
    rewards_client: httpx.AsyncClient,
) -> None:
    a = {
        "channels": {"diversity": {"weight": 0.5, "metric": "centroid"}, "judge_scale": {"k": 5}},
        "advantage": "grpo",
    }
    b = {
        "advantage": "grpo",
        "channels": {
            "judge_scale": {"weight": 1.0, "k": 5},
            "diversity": {"metric": "centroid", "weight": 0.5},
        },
    }
    hashes: set[str] = set()
    for spec in (a, b):
        checked = (await rewards_client.post("/v1/rewards/validate", json={"spec": spec})).json()
        scored = (await rewards_client.post("/v1/rewards/group", json=_body(spec))).json()
        hashes |= {checked["spec_hash"], scored["spec_hash"]}
    assert len(hashes) == 1
    other = {**a, "advantage": "none"}
    assert resolve(other).hash not in hashes


def test_hash_is_over_the_resolved_spec() -> None:
    implicit = resolve({"channels": {"judge_scale": {}}})
    explicit = resolve({"channels": {"judge_scale": {"weight": 1, "k": 10, "template": "scale"}}})
    assert implicit.hash == explicit.hash
    assert implicit.hash != resolve({"channels": {"judge_scale": {"k": 9}}}).hash
    spec, errors = check({"channels": {"foo": {}}})
    assert spec is None and [e.param for e in errors] == ["spec.channels.foo"]
