"""The all-in-one app on the real Postgres (jobs in-process), the real SmolLM2 judge and the
real MiniLM embedder; ``memory_llm`` swaps the analyst/editor for a scripted one."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from services.app import create_app
from services.core.models.embedder import Embedder
from services.memory.service import MemoryService
from services.settings import Settings
from tests.conftest import _copy_template, _drop

ADMIN = "memory-admin-key-0123456789"
TRAINER = "memory-trainer-key-0123456789"
KEYS = {ADMIN: ["admin"], TRAINER: ["reward"]}

RUBRIC = {
    "name": "boil",
    "question": "Why does water boil at a lower temperature on a mountain?",
    "criteria": [
        {"text": "Says that the air pressure is lower at altitude", "weight": 3, "anchor": True},
        {"text": "Mentions the boiling point", "weight": 1},
        {"text": "Claims that the water is colder on a mountain", "weight": 2, "kind": "pitfall"},
    ],
}
ANSWERS = [
    "Air pressure is lower at altitude, so the boiling point drops and water boils sooner.",
    "Because the water is colder on a mountain.",
    "The boiling point depends on pressure; up high the pressure is lower.",
]


@pytest.fixture
async def pg_settings(tmp_path: Path, pg_template: str) -> AsyncIterator[Settings]:
    """Postgres, with jobs run in this process (no Redis), on a database of the test's own (a
    copy of the migrated template, dropped after the test)."""
    url = await _copy_template()
    try:
        yield Settings(  # type: ignore[call-arg]
            data_dir=tmp_path / "data", database_url=url, auto_migrate=False, _env_file=None
        )
    finally:
        await _drop(url)


Make = Callable[..., Any]


@pytest.fixture
def memory_settings(pg_settings: Settings) -> Settings:
    """The set-up ``memory_app`` starts on: Postgres (a module may override this fixture to
    run on both set-ups)."""
    return pg_settings


@pytest.fixture
async def memory_app(
    memory_settings: Settings, embedder: Embedder, judge_backend: Any
) -> AsyncIterator[Make]:
    """``await make(llm=None, **overrides)``: the app started, with API keys."""
    started: list[tuple[FastAPI, Any]] = []

    async def make(llm: Any = None, **overrides: Any) -> FastAPI:
        settings = memory_settings.with_overrides(api_keys=KEYS, **overrides)
        extras = {"memory_llm": llm} if llm is not None else {}
        app = create_app(settings, embedder=embedder, judge_backend=judge_backend, **extras)
        context = app.router.lifespan_context(app)
        await context.__aenter__()
        started.append((app, context))
        return app

    yield make
    for _, context in reversed(started):
        await context.__aexit__(None, None, None)


def client(app: FastAPI, key: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://t",
        headers={"Authorization": f"Bearer {key}"},
    )


def memory_of(app: FastAPI) -> MemoryService:
    service: MemoryService = app.state.resources.services.require(MemoryService)
    return service
