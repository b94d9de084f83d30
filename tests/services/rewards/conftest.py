"""The all-in-one app with a scripted judge (aggregation tests) and the real MiniLM embedder."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI

from services.app import create_app
from services.core.models.embedder import Embedder
from services.settings import Settings
from tests.services.judge.scripted import ScriptedBackend


@pytest.fixture
def scripted() -> ScriptedBackend:
    return ScriptedBackend()


@pytest.fixture
async def rewards_client(
    settings: Settings, embedder: Embedder, scripted: ScriptedBackend
) -> AsyncIterator[httpx.AsyncClient]:
    app: FastAPI = create_app(settings, embedder=embedder, judge_backend=scripted)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            yield client
