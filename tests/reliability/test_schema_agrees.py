"""The OpenAPI schema states what the server accepts (issue 23, finding 10)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from services.core.embedder import Embedder
from services.core.settings import Settings
from tests import conftest as shared
from tests.conftest import assert_envelope
from tests.judge_service.scripted import ScriptedBackend


@pytest.fixture
async def embedded(
    embedded_settings: Settings, embedder: Embedder
) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    app = shared.create_app(embedded_settings, embedder=embedder, judge_backend=ScriptedBackend())
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            yield app, client


def _resolve(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        node = schema["components"]["schemas"][node["$ref"].rsplit("/", 1)[-1]]
    return node


async def test_plain_string_completions_are_in_the_schema(
    embedded: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    _, client = embedded
    schema = (await client.get("/openapi.json")).json()
    body = schema["paths"]["/v1/rewards/group"]["post"]["requestBody"]["content"]
    request = _resolve(schema, body["application/json"]["schema"])
    item = request["properties"]["completions"]["items"]
    assert {"type": "string"} in [
        {k: v for k, v in b.items() if k == "type"} for b in item["anyOf"]
    ], item
    accepted = await client.post(
        "/v1/rewards/group",
        json={"prompt": "p", "completions": ["a", "bb"], "spec": {"channels": {"diversity": {}}}},
    )
    assert accepted.status_code == 200, accepted.text


async def test_a_method_the_probe_route_lacks_names_its_own(
    embedded: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    """OPTIONS /v1/jobs/probe said "Allow: GET" (the ``/{job_id}`` route's)."""
    _, client = embedded
    refused = await client.options("/v1/jobs/probe")
    assert_envelope(refused, 405)
    assert refused.headers["allow"] == "POST"
