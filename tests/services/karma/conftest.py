"""KARMA serving fixtures: one all-in-one app per module (embedded set-up, API keys on), a slice
of the shared reddit_karma data as the server's ``reddit_karma``, and clients per key."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from services.app import create_app
from services.core.models.embedder import Embedder
from services.core.settings import Scope
from services.karma.settings import KarmaSettings
from services.settings import Settings
from tests.services.karma.slice import SHARED, write_slice
from tests.shared_data import reason

KEYS = {"trainer-key": [Scope.reward], "root-key": [Scope.reward, Scope.admin]}
#: A training run that finishes in seconds on two cores: a few dozen pairs, short inputs.
TINY = {
    "data": "reddit_karma",
    "method": "finetune",
    "max_train_pairs": 24,
    "epochs": 1,
    "batch_size": 8,
    "max_length": 64,
    "min_context": 16,
    "context_head": 8,
    "eval_max_pairs": 16,
    "spearman_threads": 3,
    "threads": 1,
}

needs_shared = pytest.mark.skipif(SHARED is None, reason=reason("reddit_karma"))


@pytest.fixture(scope="module")
def karma_settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """SQLite and the in-process job runner in a fresh data dir; the slice is reddit_karma."""
    root = tmp_path_factory.mktemp("karma-serving")
    sliced = write_slice(root / "reddit_karma", {"train": 24, "dev": 4, "test": 16})
    return Settings(  # type: ignore[call-arg]
        data_dir=root / "data",
        api_keys=KEYS,
        karma=KarmaSettings(
            data_dir=sliced, models_dir=root / "models", embeddings_dir=root / "embeddings"
        ),
        _env_file=None,
    )


@pytest.fixture(scope="module")
async def karma_app(
    karma_settings: Settings, embedder: Embedder, judge_backend: Any
) -> AsyncIterator[FastAPI]:
    application = create_app(karma_settings, embedder=embedder, judge_backend=judge_backend)
    async with application.router.lifespan_context(application):
        yield application


Client = Callable[[str], httpx.AsyncClient]


@pytest.fixture(scope="module")
async def as_key(karma_app: FastAPI) -> AsyncIterator[Client]:
    """``as_key("root-key")``: an in-process client sending that key."""
    clients: list[httpx.AsyncClient] = []

    def make(key: str) -> httpx.AsyncClient:
        client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=karma_app),
            base_url="http://plaudit.test",
            headers={"Authorization": f"Bearer {key}"},
        )
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.aclose()
