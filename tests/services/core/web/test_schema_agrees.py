"""The OpenAPI schema states what the server accepts (issue 23, finding 10)."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import jsonschema
import pytest
from fastapi import FastAPI

from plaudit_wire.names import MAX_REF_LENGTH, NAME_REGEX, OWNED_REF_REGEX, REF_REGEX
from services.app import create_app
from services.core.models.embedder import Embedder
from services.core.reliability_settings import LimitsSettings
from services.settings import Settings
from tests.conftest import assert_envelope
from tests.services.judge.scripted import ScriptedBackend


@pytest.fixture
async def embedded(
    embedded_settings: Settings, embedder: Embedder
) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    app = create_app(embedded_settings, embedder=embedder, judge_backend=ScriptedBackend())
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            yield app, client


#: Texts of at most four characters, so the limit is cheap to reach in a test.
TINY = LimitsSettings(max_text_chars=4)


@pytest.fixture
async def tiny(
    embedded_settings: Settings, embedder: Embedder
) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    settings = embedded_settings.model_copy(update={"limits": TINY})
    app = create_app(settings, embedder=embedder, judge_backend=ScriptedBackend())
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            yield app, client


async def test_a_method_the_probe_route_lacks_names_its_own(
    embedded: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    """OPTIONS /v1/jobs/probe said "Allow: GET" (the ``/{job_id}`` route's)."""
    _, client = embedded
    refused = await client.options("/v1/jobs/probe")
    assert_envelope(refused, 405)
    assert refused.headers["allow"] == "POST"


def _resolve(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        node = schema["components"]["schemas"][node["$ref"].rsplit("/", 1)[-1]]
    return node


def _body_schema(schema: dict[str, Any], path: str) -> dict[str, Any]:
    body = schema["paths"][path]["post"]["requestBody"]["content"]["application/json"]
    return _resolve(schema, body["schema"])


def _string_branch(node: dict[str, Any]) -> dict[str, Any]:
    """The string schema of ``node`` (``anyOf: [string, null]`` or a string)."""
    branches = node.get("anyOf", [node])
    return next(b for b in branches if b.get("type") == "string")


#: Every name or reference of a stored artifact the API takes (issue 23: names must be at most
#: 128 characters of [A-Za-z0-9._-], and the schema said "any string").
NAME_PARAMETERS = [
    ("/v1/artifacts/{name}/versions", "get", "name", NAME_REGEX),
    ("/v1/artifacts/{name}/history", "get", "name", NAME_REGEX),
    ("/v1/artifacts/{ref}", "get", "ref", REF_REGEX),
    ("/v1/rewards/specs/{ref}", "get", "ref", OWNED_REF_REGEX),
    ("/v1/rewards/specs/{name}/versions", "get", "name", OWNED_REF_REGEX),
]
NAME_FIELDS = [
    ("/v1/rewards/specs", "name", NAME_REGEX),
    ("/v1/karma/train", "name", NAME_REGEX),
    ("/v1/simulator/calibrations", "name", NAME_REGEX),
    ("/v1/karma/score", "model", REF_REGEX),
    ("/v1/simulator/turn", "calibration", REF_REGEX),
]


async def test_artifact_names_have_their_rule_in_the_schema(
    embedded: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    _, client = embedded
    schema = (await client.get("/openapi.json")).json()
    for path, method, name, pattern in NAME_PARAMETERS:
        (param,) = [p for p in schema["paths"][path][method]["parameters"] if p["name"] == name]
        assert param["schema"]["pattern"] == pattern, (path, param)
        assert param["schema"]["maxLength"] <= 41 + MAX_REF_LENGTH, (path, param)
    for path, field, pattern in NAME_FIELDS:
        node = _string_branch(_body_schema(schema, path)["properties"][field])
        assert node["pattern"] == pattern and node["maxLength"] <= MAX_REF_LENGTH, (path, node)
    assert re.fullmatch(NAME_REGEX[1:-1], "a" * 128)
    assert not re.fullmatch(NAME_REGEX[1:-1], "a" * 129)


async def test_a_spec_name_the_schema_allows_is_saved(
    embedded: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    """The schema and the server agree on the longest name: 128 (saving refused above 120)."""
    _, client = embedded
    spec: dict[str, Any] = {"channels": {"diversity": {}}}
    longest = await client.post("/v1/rewards/specs", json={"name": "s" * 128, "spec": spec})
    assert longest.status_code == 201, longest.text
    too_long = await client.post("/v1/rewards/specs", json={"name": "s" * 129, "spec": spec})
    assert_envelope(too_long, 422, "name")
    bad = await client.post("/v1/rewards/specs", json={"name": "a/b", "spec": spec})
    assert "is not an artifact name" in assert_envelope(bad, 422, "name")["message"]


async def test_an_integer_may_be_written_as_a_whole_float(
    embedded: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    """JSON Schema's integer is any number without a fraction, so 3.0 is one; the server
    refused it. 2.5, "3" and true are still refused."""
    _, client = embedded
    whole = await client.post(
        "/v1/ordinal/advantages", json={"groups": [{"scores": [1, 3], "k": 3.0}], "step": 4.0}
    )
    assert whole.status_code == 200, whole.text
    listed = await client.post(
        "/v1/rewards/group",
        json={
            "prompt": "p",
            "completions": ["a", "b"],
            "token_counts": [3.0, 4.0],
            "spec": {"channels": {"diversity": {}}},
        },
    )
    assert listed.status_code == 200, listed.text
    for wrong in (2.5, "3", True):
        refused = await client.post(
            "/v1/ordinal/advantages", json={"groups": [{"scores": [1, 3]}], "k": wrong}
        )
        assert_envelope(refused, 422, "k")


#: Rules across fields, stated as ``oneOf`` (one branch per field that may be given).
ONE_OF: list[tuple[str, tuple[str, str], dict[str, Any]]] = [
    ("/v1/judge/evaluations", ("data", "votes"), {"data": "x.jsonl"}),
    (
        "/v1/rubrics/score",
        ("rubric_id", "rubric"),
        {"completions": [{"text": "a"}], "rubric_id": "rb_1"},
    ),
    ("/v1/rubrics/synthesize", ("documents", "corpus"), {"corpus": "wikipedia"}),
]


async def test_exactly_one_of_two_fields_is_in_the_schema(
    embedded: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    _, client = embedded
    schema = (await client.get("/openapi.json")).json()
    for path, (first, second), valid in ONE_OF:
        body = dict(_body_schema(schema, path))
        assert [b["required"] for b in body["oneOf"]] == [[first], [second]], path
        # Checked as JSON Schema (references resolved from the whole document).
        checker = jsonschema.Draft202012Validator({**body, "components": schema["components"]})
        neither = {k: v for k, v in valid.items() if k not in (first, second)}
        both = {**valid, first: valid.get(first, "x"), second: valid.get(second, "x")}
        nulled = {**neither, first: None, second: None}
        assert checker.is_valid(valid), path
        assert not checker.is_valid(neither), path
        assert not checker.is_valid(both), path
        assert not checker.is_valid(nulled), path
        refused = await client.post(path, json=neither)
        assert_envelope(refused, 422)


def _completion_branches(schema: dict[str, Any], path: str) -> list[dict[str, Any]]:
    item = _body_schema(schema, path)["properties"]["completions"]["items"]
    return [_resolve(schema, b) for b in item["anyOf"]]


async def test_plain_string_completions_are_in_the_schema(
    embedded: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    """The server took ``["a", "bb"]`` where the schema allowed only ``{id, text}`` objects."""
    _, client = embedded
    schema = (await client.get("/openapi.json")).json()
    for path in ("/v1/rewards/group", "/v1/diversity/group", "/v1/judge/scale"):
        text, item = _completion_branches(schema, path)
        assert text["type"] == "string" and text["maxLength"] == 100_000, (path, text)
        assert item["type"] == "object" and item["required"] == ["text"], (path, item)
    accepted = await client.post(
        "/v1/rewards/group",
        json={"prompt": "p", "completions": ["a", "bb"], "spec": {"channels": {"diversity": {}}}},
    )
    assert accepted.status_code == 200, accepted.text


#: Four characters outside the BMP: four code points, written as four surrogate-pair escapes
#: in JSON (eight UTF-16 units), which JSON Schema and the server both count as four.
ASTRAL = "\U0001f600" * 4


@pytest.mark.parametrize("as_object", [False, True])
async def test_schema_and_server_count_text_length_the_same_way(
    tiny: tuple[FastAPI, httpx.AsyncClient], as_object: bool
) -> None:
    """A text's length is its code points on both sides (issue 23): the limit in the schema
    (``maxLength``) and the server's check accept and refuse the same texts, whether a
    character outside the BMP is sent raw in UTF-8 or as a ``\\ud83d\\ude00`` escape pair."""
    _, client = tiny
    schema = (await client.get("/openapi.json")).json()
    text, item = _completion_branches(schema, "/v1/diversity/group")
    branch = _resolve(schema, item["properties"]["text"]) if as_object else text
    assert branch["maxLength"] == 4
    check = jsonschema.Draft202012Validator(branch)
    for value, fits in ((ASTRAL, True), (ASTRAL + "x", False), ("x" * 5, False)):
        assert check.is_valid(value) is fits, value
        completion: Any = {"text": value} if as_object else value
        for escaped in (False, True):  # raw UTF-8, and JSON's \\u escapes (surrogate pairs)
            body = json.dumps({"completions": [completion, "ok"]}, ensure_ascii=escaped)
            answer = await client.post(
                "/v1/diversity/group",
                content=body.encode(),
                headers={"Content-Type": "application/json"},
            )
            assert (answer.status_code == 200) is fits, (value, escaped, answer.text)
