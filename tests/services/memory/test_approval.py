"""An admin approves or dismisses a held revision (``POST /v1/memory/revisions/{id}/approve``,
``/dismiss``): the approval applies a new rubric version and its ``rubric_update`` record once,
even when several arrive at once; a revision that is not held, or whose rubric moved on, is
refused with 409. On both set-ups (SQLite and Postgres), real judge and embedder; the editor is
scripted (a reweight, then the reweight back, which the guard holds as an undo)."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import update

from services.core.db.tables import utcnow
from services.memory.models import MemoryRevision
from services.settings import Settings
from tests.conftest import assert_envelope
from tests.services.memory.conftest import ADMIN, TRAINER, Make, client
from tests.services.memory.helpers import create_rubric, settle
from tests.services.memory.scripted import ScriptedLLM

RUN = "run-approval"
#: c2 ("Mentions the boiling point") is weight 1: up to 2, then back to 1 (an undo: held).
EDITS: list[list[dict[str, Any]]] = [
    [{"op": "reweight", "id": "c2", "text": "", "weight": 2}],
    [{"op": "reweight", "id": "c2", "text": "", "weight": 1}],
]
GROUP = {
    "prompt": "Why does water boil sooner up a mountain?",
    "completions": ["Lower air pressure.", "It is colder.", "Pressure drops, so it boils."],
    "rewards": [1.0, -0.5, 0.8],
    "verdicts": [
        {"c1": 0.9, "c2": 0.2, "c3": 0.1},
        {"c1": 0.1, "c2": 0.3, "c3": 0.9},
        {"c1": 0.8, "c2": 0.6, "c3": 0.2},
    ],
}


@pytest.fixture(params=["embedded", "postgres"])
def memory_settings(request: pytest.FixtureRequest) -> Settings:
    """Both set-ups: SQLite in a fresh data dir, and the real Postgres."""
    name = "embedded_settings" if request.param == "embedded" else "pg_settings"
    value: Settings = request.getfixturevalue(name)
    return value


async def _step(trainer: httpx.AsyncClient, rubric_id: str, step: int) -> None:
    body = {"rubric_id": rubric_id, "groups": [GROUP], "close": True}
    answer = await trainer.post(f"/v1/memory/runs/{RUN}/steps/{step}", json=body)
    assert answer.status_code == 202, answer.text


async def _held(
    app: FastAPI, trainer: httpx.AsyncClient, admin: httpx.AsyncClient
) -> tuple[str, dict[str, Any]]:
    """A rubric at version 2 (the first revision applied) and the second revision, held."""
    rubric_id = await create_rubric(trainer)
    await _step(trainer, rubric_id, 1)
    [first] = await settle(app, admin, RUN)
    assert first["state"] == "applied" and first["to_version"] == 2, first
    await _step(trainer, rubric_id, 2)
    held, _ = await settle(app, admin, RUN)
    assert held["state"] == "held", held
    assert held["reason"].startswith("undoes a recent edit"), held
    assert held["from_version"] == 2 and held["to_version"] is None
    return rubric_id, held


async def _updates(admin: httpx.AsyncClient) -> list[dict[str, Any]]:
    page = await admin.get("/v1/memory/records", params={"run_id": RUN, "kind": "rubric_update"})
    items: list[dict[str, Any]] = page.json()["items"]
    return items


async def test_an_approval_applies_the_held_revision(memory_app: Make) -> None:
    app = await memory_app(llm=ScriptedLLM(EDITS), memory_revise_every=1)
    async with client(app, TRAINER) as trainer, client(app, ADMIN) as admin:
        rubric_id, held = await _held(app, trainer, admin)
        assert (await trainer.post(f"/v1/memory/revisions/{held['id']}/approve")).status_code == 403
        assert (await trainer.post(f"/v1/memory/revisions/{held['id']}/dismiss")).status_code == 403

        answer = await admin.post(f"/v1/memory/revisions/{held['id']}/approve")
        assert answer.status_code == 200, answer.text
        applied = answer.json()
        assert (applied["state"], applied["from_version"], applied["to_version"]) == (
            "applied",
            2,
            3,
        )
        assert applied["reason"] is None
        approved = applied["detail"]["approved"]
        assert approved["by"] and approved["at"]
        assert approved["held_because"] == held["reason"]
        assert applied["detail"]["proposed_criteria"] == held["detail"]["proposed_criteria"]

        rubric = (await admin.get(f"/v1/rubrics/{rubric_id}")).json()
        assert (rubric["version"], rubric["current_version"]) == (3, 3)
        weights = {c["id"]: c["weight"] for c in rubric["criteria"]}
        assert weights["c2"] == 1.0, "the held reweight back to 1 is now applied"
        versions = (await admin.get(f"/v1/rubrics/{rubric_id}/versions")).json()["items"]
        assert any(held["id"] in (v["note"] or "") for v in versions if v["version"] == 3)

        newest, _ = await _updates(admin)
        assert newest["id"] == applied["detail"]["record_id"]
        data = newest["data"]
        assert (data["operation"], data["revision_id"]) == ("revision", held["id"])
        assert (data["from_version"], data["to_version"]) == (2, 3)
        assert data["approved"]["by"] == approved["by"]
        assert data["evidence"] == held["evidence"] and data["rationale"] == held["rationale"]
        assert "Rubric v2 -> v3" in newest["text"]

        listed = (await admin.get(f"/v1/memory/runs/{RUN}/revisions")).json()["items"]
        assert listed[0]["id"] == held["id"] and listed[0]["state"] == "applied"

        again = await admin.post(f"/v1/memory/revisions/{held['id']}/approve")
        error = assert_envelope(again, 409, "revision_id")
        assert "is applied, not held" in error["message"]
        assert (await admin.get(f"/v1/rubrics/{rubric_id}")).json()["version"] == 3
        dismissed = await admin.post(f"/v1/memory/revisions/{held['id']}/dismiss")
        assert_envelope(dismissed, 409, "revision_id")
        assert len(await _updates(admin)) == 2


async def test_a_dismissal_rejects_it_and_applies_nothing(memory_app: Make) -> None:
    app = await memory_app(llm=ScriptedLLM(EDITS), memory_revise_every=1)
    async with client(app, TRAINER) as trainer, client(app, ADMIN) as admin:
        rubric_id, held = await _held(app, trainer, admin)
        answer = await admin.post(f"/v1/memory/revisions/{held['id']}/dismiss")
        assert answer.status_code == 200, answer.text
        rejected = answer.json()
        assert rejected["state"] == "rejected" and rejected["to_version"] is None
        assert rejected["reason"].startswith("dismissed by an admin (key ")
        dismissed = rejected["detail"]["dismissed"]
        assert dismissed["by"] in rejected["reason"] and dismissed["at"]
        assert dismissed["held_because"] == held["reason"]
        assert (await admin.get(f"/v1/rubrics/{rubric_id}")).json()["version"] == 2
        assert len(await _updates(admin)) == 1
        for verb in ("approve", "dismiss"):
            again = await admin.post(f"/v1/memory/revisions/{held['id']}/{verb}")
            assert "is rejected, not held" in assert_envelope(again, 409)["message"]
        assert (await admin.get(f"/v1/rubrics/{rubric_id}")).json()["version"] == 2


async def test_unknown_and_not_held_revisions_are_refused(memory_app: Make) -> None:
    app = await memory_app(llm=ScriptedLLM(EDITS), memory_revise_every=1)
    async with client(app, TRAINER) as trainer, client(app, ADMIN) as admin:
        for verb in ("approve", "dismiss"):
            missing = await admin.post(f"/v1/memory/revisions/rv_0123456789abcdef0123/{verb}")
            assert_envelope(missing, 404, "revision_id")
            malformed = await admin.post(f"/v1/memory/revisions/not-an-id/{verb}")
            assert malformed.status_code == 422
        rubric_id = await create_rubric(trainer)
        await _step(trainer, rubric_id, 1)
        [applied] = await settle(app, admin, RUN)
        assert applied["state"] == "applied"
        for verb in ("approve", "dismiss"):
            answer = await admin.post(f"/v1/memory/revisions/{applied['id']}/{verb}")
            assert "is applied, not held" in assert_envelope(answer, 409, "revision_id")["message"]
        assert (await admin.get(f"/v1/rubrics/{rubric_id}")).json()["version"] == 2


async def test_a_rubric_that_moved_on_refuses_the_approval(memory_app: Make) -> None:
    app = await memory_app(llm=ScriptedLLM(EDITS), memory_revise_every=1)
    async with client(app, TRAINER) as trainer, client(app, ADMIN) as admin:
        rubric_id, held = await _held(app, trainer, admin)
        rubric = (await admin.get(f"/v1/rubrics/{rubric_id}")).json()
        edited = {"name": rubric["name"], "criteria": rubric["criteria"], "note": "by hand"}
        edited["criteria"][2]["weight"] = 3
        put = await trainer.put(f"/v1/rubrics/{rubric_id}", json=edited)
        assert put.status_code == 200 and put.json()["version"] == 3, put.text

        answer = await admin.post(f"/v1/memory/revisions/{held['id']}/approve")
        message = assert_envelope(answer, 409)["message"]
        assert "at version 3 now, not version 2" in message and "look at version 3" in message
        assert "nothing was applied" in message
        after = (await admin.get(f"/v1/rubrics/{rubric_id}")).json()
        assert (after["version"], after["latest_version"]) == (3, 3)
        [again, _] = (await admin.get(f"/v1/memory/runs/{RUN}/revisions")).json()["items"]
        assert again["state"] == "held" and again["updated_at"] >= held["updated_at"]
        assert len(await _updates(admin)) == 1

        # rolled back to the version it was proposed on, it applies on top of that one
        rolled = await admin.post(
            f"/v1/memory/rubrics/{rubric_id}/rollback", json={"version": 2, "run_id": RUN}
        )
        assert rolled.status_code == 200, rolled.text
        answer = await admin.post(f"/v1/memory/revisions/{held['id']}/approve")
        assert answer.status_code == 200, answer.text
        assert (answer.json()["from_version"], answer.json()["to_version"]) == (2, 4)


async def test_concurrent_approvals_apply_once(memory_app: Make) -> None:
    """Eight approvals of one held revision at once: one applies, seven get 409, and the rubric
    gets exactly one new version and the memory one record."""
    app = await memory_app(llm=ScriptedLLM(EDITS), memory_revise_every=1)
    async with client(app, TRAINER) as trainer, client(app, ADMIN) as admin:
        rubric_id, held = await _held(app, trainer, admin)
        answers = await asyncio.gather(
            *(admin.post(f"/v1/memory/revisions/{held['id']}/approve") for _ in range(8))
        )
        assert sorted(a.status_code for a in answers) == [200] + [409] * 7, [
            a.text for a in answers
        ]
        for refused in (a for a in answers if a.status_code == 409):
            assert "not held" in assert_envelope(refused, 409)["message"]
        rubric = (await admin.get(f"/v1/rubrics/{rubric_id}")).json()
        assert (rubric["version"], rubric["latest_version"]) == (3, 3)
        assert len(await _updates(admin)) == 2
        [listed, _] = (await admin.get(f"/v1/memory/runs/{RUN}/revisions")).json()["items"]
        assert (listed["state"], listed["to_version"]) == ("applied", 3)


async def test_concurrent_approvals_and_dismissals_decide_once(memory_app: Make) -> None:
    """Approvals and dismissals at once: the first decision stands, every other gets 409."""
    app = await memory_app(llm=ScriptedLLM(EDITS), memory_revise_every=1)
    async with client(app, TRAINER) as trainer, client(app, ADMIN) as admin:
        rubric_id, held = await _held(app, trainer, admin)
        verbs = ["approve", "dismiss"] * 4
        answers = await asyncio.gather(
            *(admin.post(f"/v1/memory/revisions/{held['id']}/{verb}") for verb in verbs)
        )
        assert sorted(a.status_code for a in answers) == [200] + [409] * 7
        [winner] = [a.json() for a in answers if a.status_code == 200]
        applied = winner["state"] == "applied"
        assert applied or winner["state"] == "rejected", winner
        rubric = (await admin.get(f"/v1/rubrics/{rubric_id}")).json()
        assert rubric["latest_version"] == (3 if applied else 2)
        assert len(await _updates(admin)) == (2 if applied else 1)


async def test_an_approval_left_unfinished_is_taken_over_later(memory_app: Make) -> None:
    """A claim (``approving``) left by a process that died refuses others for a while, then
    lets the next approval take it over."""
    app = await memory_app(llm=ScriptedLLM(EDITS), memory_revise_every=1)
    sessions = app.state.resources.sessions

    async def left_at(age: timedelta) -> None:
        async with sessions() as session, session.begin():
            await session.execute(
                update(MemoryRevision)
                .where(MemoryRevision.id == held["id"])
                .values(state="approving", updated_at=utcnow() - age)
            )

    async with client(app, TRAINER) as trainer, client(app, ADMIN) as admin:
        rubric_id, held = await _held(app, trainer, admin)
        await left_at(timedelta(seconds=1))
        listed = (await admin.get(f"/v1/memory/runs/{RUN}/revisions")).json()["items"]
        assert listed[0]["state"] == "approving"
        busy = await admin.post(f"/v1/memory/revisions/{held['id']}/approve")
        assert "approval is in progress" in assert_envelope(busy, 409)["message"]
        await left_at(timedelta(minutes=6))
        answer = await admin.post(f"/v1/memory/revisions/{held['id']}/approve")
        assert answer.status_code == 200, answer.text
        assert answer.json()["state"] == "applied"
        assert (await admin.get(f"/v1/rubrics/{rubric_id}")).json()["version"] == 3
