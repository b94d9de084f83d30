"""The all-in-one app with the scripted rubric judge (plumbing) on SQLite and on Postgres."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from services.app import create_app
from services.core.models.embedder import Embedder
from services.settings import Settings
from tests.services.rubrics.scripted import RubricScriptedBackend

REWARD_KEY = "rubrics-reward-key"
OTHER_KEY = "rubrics-other-key"
ADMIN_KEY = "rubrics-admin-key"
KEYS = {REWARD_KEY: ["reward"], OTHER_KEY: ["reward"], ADMIN_KEY: ["admin"]}

BOIL = {
    "name": "boil",
    "question": "Why does water boil at a lower temperature on a mountain?",
    "reference_answer": "Air pressure is lower at altitude, so water boils sooner.",
    "domain": "science",
    "source": "tests",
    "criteria": [
        {"text": "Says that the air pressure is lower", "weight": 3},
        {"text": "Gives the boiling point drop with altitude", "weight": 1},
        {"text": "Claims the water is colder", "weight": 2, "kind": "pitfall"},
    ],
}


@pytest.fixture
def scripted() -> RubricScriptedBackend:
    return RubricScriptedBackend()


@pytest.fixture
async def rubrics_app(
    settings: Settings, embedder: Embedder, scripted: RubricScriptedBackend
) -> AsyncIterator[FastAPI]:
    app = create_app(settings, embedder=embedder, judge_backend=scripted)
    async with app.router.lifespan_context(app):
        yield app


@pytest.fixture
async def api(rubrics_app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=rubrics_app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        yield client


@pytest.fixture
async def keyed(
    settings: Settings, embedder: Embedder, scripted: RubricScriptedBackend
) -> AsyncIterator[Callable[[str], httpx.AsyncClient]]:
    """A factory of clients of one app with API keys: ``keyed(REWARD_KEY)``."""
    app = create_app(
        settings.with_overrides(api_keys=KEYS), embedder=embedder, judge_backend=scripted
    )
    clients: list[httpx.AsyncClient] = []

    def make(key: str) -> httpx.AsyncClient:
        client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app),
            base_url="http://t",
            headers={"Authorization": f"Bearer {key}"},
        )
        clients.append(client)
        return client

    async with app.router.lifespan_context(app):
        yield make
        for client in clients:
            await client.aclose()


async def create(client: httpx.AsyncClient, body: dict[str, Any] | None = None) -> dict[str, Any]:
    response = await client.post("/v1/rubrics", json=body or BOIL)
    assert response.status_code == 201, response.text
    data: dict[str, Any] = response.json()
    return data
