"""Schema and server agree on NUL (U+0000) in stored texts (issue 23, finding 10): a field the
server refuses NUL in says so in the OpenAPI schema, and Postgres, which cannot store NUL in
text, never sees one."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from services.app import create_app
from services.core.models.embedder import Embedder
from services.settings import Settings
from tests.conftest import assert_envelope
from tests.services.judge.scripted import ScriptedBackend

RUBRIC = {"name": "nul", "question": "q?", "criteria": [{"text": "says yes", "weight": 1}]}


@pytest.fixture
async def client(
    deployed_settings: Settings, embedder: Embedder
) -> AsyncIterator[httpx.AsyncClient]:
    """The all-in-one app on Postgres and Redis, with a scripted judge."""
    app = create_app(deployed_settings, embedder=embedder, judge_backend=ScriptedBackend())
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            yield c


def _resolve(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        node = schema["components"]["schemas"][node["$ref"].rsplit("/", 1)[-1]]
    return node


def _field(schema: dict[str, Any], path: str, field: str) -> dict[str, Any]:
    """The string branch of a body field's schema."""
    body = schema["paths"][path]["post"]["requestBody"]["content"]["application/json"]
    model = body["schema"]
    model = next((b for b in model.get("anyOf", []) if "$ref" in b), model)  # an optional body
    node = _resolve(schema, model)["properties"][field]
    return next(b for b in node.get("anyOf", [node]) if b.get("type") == "string")


#: Stored texts without a pattern of their own (ids and names have theirs).
STORED_TEXTS = [
    ("/v1/memory/rubrics/{rubric_id}/rollback", "reason"),
    ("/v1/rubrics/{rubric_id}/rollback", "note"),
    ("/v1/rubrics", "question"),
    ("/v1/karma/train", "note"),
    ("/v1/karma/models/{version}/promote", "note"),
    ("/v1/simulator/calibrations", "note"),
    ("/v1/artifacts/{name}/rollback", "note"),
]


async def test_stored_texts_refuse_nul_in_the_schema(client: httpx.AsyncClient) -> None:
    schema = (await client.get("/openapi.json")).json()
    for path, field in STORED_TEXTS:
        pattern = _field(schema, path, field).get("pattern")
        assert pattern is not None, (path, field)
        assert not re.search(pattern, "a\x00b") and re.search(pattern, "a b"), (path, pattern)


async def test_a_rollback_reason_with_nul_is_refused_on_postgres(client: httpx.AsyncClient) -> None:
    created = await client.post("/v1/rubrics", json=RUBRIC)
    assert created.status_code == 201, created.text
    rubric_id = created.json()["id"]
    edited = await client.put(f"/v1/rubrics/{rubric_id}", json={**RUBRIC, "question": "q2?"})
    assert edited.status_code == 200, edited.text
    path = f"/v1/memory/rubrics/{rubric_id}/rollback"
    refused = await client.post(path, json={"version": 1, "reason": "bad\u0000edit"})
    assert "NUL" in assert_envelope(refused, 422, "reason")["message"]
    accepted = await client.post(path, json={"version": 1, "reason": "bad edit"})
    assert accepted.status_code == 200, accepted.text
    assert accepted.json()["record"]["data"]["reason"] == "bad edit"
