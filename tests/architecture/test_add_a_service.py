"""Adding a service is one folder and one line (issue 20): a small service written into a
temporary folder, with its own settings section, table, job and reward channel, joins the
list of services and is served, configured, stored, run by the job runner and used by the
rewards service, without an edit anywhere else."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest

from services.app import components
from services.core.components import settings_sections
from services.core.db.tables import Base
from services.core.settings import compose_settings
from services.core.settings_check import settings_variables
from services.core.web.app_factory import build_app
from tests.services.core.jobs.conftest import finished, wait_until
from tests.services.judge.scripted import ScriptedBackend

SETTINGS = """
from typing import ClassVar

from services.core.settings import Section


class EchoSettings(Section):
    section_name: ClassVar[str] = "echo"
    greeting: str = "hello"
"""

MODELS = """
from sqlalchemy import Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from services.core.db.tables import Base


class EchoNote(Base):
    __tablename__ = "echo_notes"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    text: Mapped[str] = mapped_column(String(100), nullable=False)
"""

APP = """
from typing import Any

from fastapi import APIRouter, Request
from sqlalchemy import select

from services.core.channels import Channel, ChannelOutcome, ChannelSpec, GroupInput
from services.core.components import Component
from services.core.web.deps import get_resources
from services.core.jobs.context import JobContext
from services.core.resources import Resources
from services.jobs.deps import JobCaller, accepted
from plaudit_wire.schemas import StrictModel

from plaudit_echo.models import EchoNote
from plaudit_echo.settings import EchoSettings

COUNT = "echo.count"
router = APIRouter(prefix="/v1/echo", tags=["echo"])


class Note(StrictModel):
    text: str


class EchoService:
    def __init__(self, resources: Resources) -> None:
        self.settings = EchoSettings.of(resources.settings)
        self.sessions = resources.sessions

    async def keep(self, text: str) -> list[str]:
        async with self.sessions.begin() as session:
            session.add(EchoNote(text=text))
        async with self.sessions() as session:
            return list((await session.scalars(select(EchoNote.text))).all())


async def count(ctx: JobContext, params: dict[str, Any]) -> dict[str, Any]:
    await ctx.progress(1, 1, "counted")
    return {"letters": len(params["text"])}


class LengthSpec(ChannelSpec):
    def value_range(self) -> tuple[float, float] | None:
        return None


async def length(spec: LengthSpec, group: GroupInput) -> ChannelOutcome:
    n = len(group.completions)
    return ChannelOutcome(
        values=[float(len(c.text)) for c in group.completions],
        statuses=["ok"] * n, meta={}, details=[{}] * n,
    )


@router.post("/notes")
async def note(body: Note, request: Request) -> dict[str, Any]:
    service = get_resources(request).services.require(EchoService)
    return {"greeting": service.settings.greeting, "notes": await service.keep(body.text)}


@router.post("/count", status_code=202)
async def start(body: Note, request: Request, caller: JobCaller) -> Any:
    return await accepted(request, caller, COUNT, body)


def component() -> Component:
    def build(resources: Resources) -> EchoService:
        resources.job_registry.register(COUNT, count)
        return EchoService(resources)

    return Component(
        name="echo", router=router, provides=EchoService, build=build,
        settings=EchoSettings, jobs=(COUNT,),
        channels=lambda service: [Channel("echo_length", LengthSpec, length, "letters")],
    )
"""


@pytest.fixture
def echo(tmp_path: Path) -> Iterator[ModuleType]:
    """The ``plaudit_echo`` package, written into a temporary folder and imported."""
    package = tmp_path / "plaudit_echo"
    package.mkdir()
    for name, text in {"__init__": "", "settings": SETTINGS, "models": MODELS, "app": APP}.items():
        (package / f"{name}.py").write_text(textwrap.dedent(text))
    sys.path.insert(0, str(tmp_path))
    try:
        import plaudit_echo.app  # type: ignore[import-not-found]

        yield plaudit_echo.app
    finally:
        sys.path.remove(str(tmp_path))
        for name in [m for m in sys.modules if m.startswith("plaudit_echo")]:
            del sys.modules[name]
        # Off the shared metadata again, so the migrations' check sees only real tables.
        Base.metadata.remove(Base.metadata.tables["echo_notes"])


@pytest.fixture
async def client(
    echo: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, embedder: Any
) -> AsyncIterator[httpx.AsyncClient]:
    # The one line: the echo component joins the list of services.
    served = [*components(), echo.component()]
    settings_class = compose_settings(settings_sections(served))
    assert "PLAUDIT_ECHO_GREETING" in settings_variables(settings_class)
    monkeypatch.setenv("PLAUDIT_ECHO_GREETING", "bonjour")
    settings = settings_class(data_dir=tmp_path / "data", _env_file=None)  # type: ignore[call-arg]
    app = build_app(served, settings, embedder=embedder, judge_backend=ScriptedBackend())
    async with app.router.lifespan_context(app):
        # A real service adds a migration for its table; here it is created from the model.
        async with app.state.resources.engine.begin() as conn:
            await conn.run_sync(Base.metadata.tables["echo_notes"].create)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://plaudit.test") as c:
            yield c


async def test_a_service_in_its_own_folder_is_served_configured_stored_and_run(
    client: httpx.AsyncClient,
) -> None:
    first = await client.post("/v1/echo/notes", json={"text": "one"})
    second = await client.post("/v1/echo/notes", json={"text": "two"})
    assert first.status_code == 200, first.text
    assert second.json() == {"greeting": "bonjour", "notes": ["one", "two"]}

    started = await client.post("/v1/echo/count", json={"text": "four"})
    assert started.status_code == 202, started.text
    job = await wait_until(client, started.json()["id"], finished)
    assert (job["state"], job["result"]) == ("succeeded", {"letters": 4})

    group = {
        "prompt": "p",
        "completions": ["ab", "abcd"],
        "spec": {"channels": {"echo_length": {}}},
    }
    scored = await client.post("/v1/rewards/group", json=group)
    assert scored.status_code == 200, scored.text
    assert [r["total"] for r in scored.json()["results"]] == [2.0, 4.0]
    assert "/v1/echo/notes" in (await client.get("/openapi.json")).json()["paths"]
