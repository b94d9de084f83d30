"""A single-valued query parameter given twice is a 422 naming it, on every route (issue 23:
``?limit=5&limit=7`` was read as one of the two, silently)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Annotated, Any

import httpx
import pytest
from fastapi import Depends, FastAPI, Query

from services.app import create_app
from services.core.models.embedder import Embedder
from services.core.web.envelope import install_error_handlers
from services.core.web.query_once import query_once
from services.settings import Settings
from tests.conftest import assert_envelope
from tests.services.judge.scripted import ScriptedBackend


@pytest.fixture
async def client(
    embedded_settings: Settings, embedder: Embedder
) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(embedded_settings, embedder=embedder, judge_backend=ScriptedBackend())
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            yield c


async def test_a_repeated_limit_is_refused(client: httpx.AsyncClient) -> None:
    refused = await client.get("/v1/jobs", params=[("limit", "5"), ("limit", "7")])
    error = assert_envelope(refused, 422, "limit")
    assert "2 times" in error["message"]
    assert (await client.get("/v1/jobs", params={"limit": "5", "offset": "0"})).status_code == 200


async def test_every_scalar_query_parameter_is_refused_twice(client: httpx.AsyncClient) -> None:
    schema = (await client.get("/openapi.json")).json()
    checked = 0
    for path, operations in schema["paths"].items():
        # A rubric id segment takes only rubric ids (rb_...): any other value is not that route.
        url = re.sub(r"\{rubric_id\}", "rb_x", path)
        url = re.sub(r"\{[^}]+\}", "x", url)
        for method, operation in operations.items():
            for param in operation.get("parameters", []):
                if param["in"] != "query":
                    continue
                name = param["name"]
                answer = await client.request(method, url, params=[(name, "1"), (name, "2")])
                assert_envelope(answer, 422, name)
                checked += 1
    assert checked > 20


async def test_a_list_parameter_still_takes_many() -> None:
    app = FastAPI(dependencies=[Depends(query_once)])
    install_error_handlers(app)

    @app.get("/tags")
    async def tags(
        tag: Annotated[list[str] | None, Query()] = None, limit: int = 10
    ) -> dict[str, Any]:
        return {"tags": tag, "limit": limit}

    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
        many = await c.get("/tags", params=[("tag", "a"), ("tag", "b"), ("limit", "3")])
        assert many.json() == {"tags": ["a", "b"], "limit": 3}
        refused = await c.get("/tags?limit=1&tag=a&limit=2")
        assert refused.status_code == 422 and refused.json()["error"]["param"] == "limit"
