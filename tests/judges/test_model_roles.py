"""Every model role gets its backend from the one model layer, with the same limits (issue 19).

The all-in-one app is started with each role (judge, memory analyst/editor, simulator,
synthesis generator) on its own OpenAI-compatible backend, pointed at the real loopback
stand-in server; each role's backend, as the app built it, must keep to its concurrency cap
and its per-attempt timeout (with the retry that a short attempt makes possible). Before the
model layer, the simulator's backend had no limiter and a fixed 60 s timeout, the memory's a
16-slot limiter of its own, and synthesis had no backend of its own.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI

from judges.backends.base import GenerateRequest, JudgeBackend, user
from services.app import create_app
from services.core.models.embedder import Embedder
from services.settings import Settings
from tests.judges.openai_standin import MODEL, StandIn, stand_in_server

#: The app's name for each role's backend (``Resources.models``).
ROLES = ("judge", "memory_llm", "simulator", "synthesis")
CAP = 2


@pytest.fixture(scope="module")
def stand_in() -> Iterator[StandIn]:
    with stand_in_server() as server:
        yield server


def role_overrides(url: str) -> dict[str, Any]:
    """Every role on ``url``, spelled as the environment spells them (PLAUDIT_...)."""
    limits = {"max_concurrency": CAP, "attempt_timeout_s": 0.5, "max_retries": 1}
    fields: dict[str, Any] = {"backend": "openai", "base_url": url, "model": MODEL, **limits}
    spelled: dict[str, Any] = {}
    for name, value in fields.items():
        spelled[f"judge_{name}"] = value
        spelled[f"memory_llm_{name}"] = value
        spelled[f"simulator_{name}"] = value
        spelled[f"rubrics_synthesis_{name}"] = value
    spelled["memory_llm"] = "openai"  # PLAUDIT_MEMORY_LLM=openai, as before
    return spelled


@pytest.fixture
async def started(
    tmp_path: Path, embedder: Embedder, stand_in: StandIn
) -> AsyncIterator[tuple[FastAPI, str]]:
    """The all-in-one app with every role on one run of the stand-in's ``slow`` and ``hang``
    behaviours: ``(app, run id)``; the backends are reached through ``models()``."""
    run = uuid.uuid4().hex
    base = Settings(data_dir=tmp_path, _env_file=None)  # type: ignore[call-arg]
    app = create_app(
        base.with_overrides(**role_overrides(stand_in.url("slow", run))), embedder=embedder
    )
    context = app.router.lifespan_context(app)
    await context.__aenter__()
    try:
        yield app, run
    finally:
        await context.__aexit__(None, None, None)


def models(app: FastAPI) -> dict[str, JudgeBackend]:
    found = {name: app.state.resources.models.get(name) for name in ROLES}
    assert all(isinstance(b, JudgeBackend) for b in found.values()), found
    return found


async def test_every_role_keeps_to_its_concurrency_cap(
    started: tuple[FastAPI, str], stand_in: StandIn
) -> None:
    app, run = started
    backends = models(app)
    assert len({id(b) for b in backends.values()}) == len(ROLES), "each role has its own"
    for role, backend in backends.items():
        before = len(stand_in.run(run).bodies)
        stand_in.run(run).peak = 0
        results = await backend.generate([GenerateRequest([user(role)], max_new_tokens=8)] * 6)
        assert [r.status for r in results] == ["ok"] * 6, role
        assert len(stand_in.run(run).bodies) == before + 6
        assert stand_in.run(run).peak == CAP, f"{role}: {stand_in.run(run).peak} in flight"


async def test_every_role_times_out_an_attempt_and_retries(
    tmp_path: Path, embedder: Embedder, stand_in: StandIn
) -> None:
    run = uuid.uuid4().hex
    base = Settings(data_dir=tmp_path, _env_file=None)  # type: ignore[call-arg]
    app = create_app(
        base.with_overrides(**role_overrides(stand_in.url("hang", run))), embedder=embedder
    )
    context = app.router.lifespan_context(app)
    await context.__aenter__()
    try:
        backends = models(app)
        ask = [GenerateRequest([user("hang")], max_new_tokens=8)]
        replies = await asyncio.gather(*(b.generate(ask) for b in backends.values()))
    finally:
        await context.__aexit__(None, None, None)
    assert [reply[0].status for reply in replies] == ["timeout"] * len(ROLES)
    # Two attempts each: the first timed out, and so did the retry, where a fixed 60 s
    # timeout would have waited for the stand-in's answer (ok, after HANG_S seconds).
    assert len(stand_in.run(run).bodies) == 2 * len(ROLES)
