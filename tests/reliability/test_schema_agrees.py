"""The OpenAPI schema states what the server accepts (issue 23, finding 10)."""

from __future__ import annotations

from collections.abc import AsyncIterator

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


async def test_a_method_the_probe_route_lacks_names_its_own(
    embedded: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    """OPTIONS /v1/jobs/probe said "Allow: GET" (the ``/{job_id}`` route's)."""
    _, client = embedded
    refused = await client.options("/v1/jobs/probe")
    assert_envelope(refused, 405)
    assert refused.headers["allow"] == "POST"
