"""The all-in-one app with the scripted judge and the real MiniLM embedder, on both set-ups."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from services.core.models.embedder import Embedder
from services.settings import Settings
from tests import conftest as shared
from tests.services.judge.scripted import ScriptedBackend


@pytest.fixture
def overrides() -> dict[str, Any]:
    """Settings fields a test module changes (override this fixture)."""
    return {}


@pytest.fixture
def scripted() -> ScriptedBackend:
    return ScriptedBackend()


@pytest.fixture
async def fast_app(
    settings: Settings, embedder: Embedder, overrides: dict[str, Any], scripted: ScriptedBackend
) -> AsyncIterator[FastAPI]:
    """The started all-in-one app with the scripted judge (no model to load)."""
    active = settings.model_copy(update=overrides)
    app: FastAPI = shared.create_app(active, embedder=embedder, judge_backend=scripted)
    async with app.router.lifespan_context(app):
        yield app


@pytest.fixture
async def fast_client(fast_app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=fast_app)
    async with httpx.AsyncClient(transport=transport, base_url="http://plaudit.test") as client:
        yield client
