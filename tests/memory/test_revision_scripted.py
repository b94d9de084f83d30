"""The applied and held paths of revision with a scripted editor (the real judge and embedder
still score, embed and guard), focal weights fed by the memory, the recorded rollback, and a
full ingest queue that drops without failing scoring. Real Postgres."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from services.rubrics.aggregate import focal_weights
from services.rubrics.schemas import Criterion
from tests.memory.conftest import ADMIN, TRAINER, Make, client, memory_of
from tests.memory.helpers import RUN, create_rubric, memory_stamp, score_step, settle
from tests.memory.scripted import ScriptedLLM

HARDER = "Gives the boiling point in degrees Celsius at a stated altitude"
EDITS: list[list[dict[str, Any]]] = [
    [
        {"op": "reword", "id": "c2", "text": HARDER, "weight": 0},
        {"op": "reword", "id": "c1", "text": "Says the pressure is lower, in kPa", "weight": 0},
    ],
    [{"op": "reword", "id": "c2", "text": "Mentions the boiling point", "weight": 0}],
]


async def test_an_edit_is_applied_then_its_undo_is_held(memory_app: Make) -> None:
    llm = ScriptedLLM(EDITS)
    app = await memory_app(llm=llm, memory_revise_every=1, memory_max_flip_rate=1.0)
    async with client(app, TRAINER) as trainer, client(app, ADMIN) as admin:
        rubric_id = await create_rubric(trainer)
        await score_step(trainer, rubric_id, 1)
        await score_step(trainer, rubric_id, 2)
        [first] = await settle(app, admin)
        assert first["state"] == "applied", first
        assert (first["from_version"], first["to_version"], first["step"]) == (1, 2, 1)
        reword, anchor = first["operations"]
        assert reword["accepted"] and reword["before"]["text"] == "Mentions the boiling point"
        assert not anchor["accepted"] and "anchor" in anchor["reason"]
        assert first["rationale"] == "scripted edit 0"
        assert llm.analyst_calls == 2, "the analyst read two rollouts"
        assert "Step 1:" in llm.prompts[0], "the editor saw the step summary"

        rubric = (await admin.get(f"/v1/rubrics/{rubric_id}")).json()
        assert rubric["version"] == 2
        assert [c["text"] for c in rubric["criteria"]][:2] == [
            "Says that the air pressure is lower at altitude",
            HARDER,
        ]
        diff = (await admin.get(f"/v1/rubrics/{rubric_id}/diff?from=1&to=2")).json()
        assert [c["id"] for c in diff["changed"]] == ["c2"]

        third = await score_step(trainer, rubric_id, 3)
        stamp = memory_stamp(third)
        assert stamp["rubric_version"] == 2 and stamp["evidence_step"] == 1
        assert stamp["staleness"] == 2
        assert third["results"][0]["channels"]["rubric"]["meta"]["rubric"]["version"] == 2

        second, again = await settle(app, admin)
        assert again["id"] == first["id"]
        assert second["state"] == "held", second
        assert second["reason"].startswith("undoes a recent edit: rewords c2 back")
        assert second["to_version"] is None
        assert (await admin.get(f"/v1/rubrics/{rubric_id}")).json()["version"] == 2
        assert second["detail"]["proposed_criteria"][1]["text"] == "Mentions the boiling point"
        assert "Rubric v1 -> v2" in llm.prompts[1], "the editor saw the earlier update"

        updates = await admin.get(
            "/v1/memory/records", params={"run_id": RUN, "kind": "rubric_update"}
        )
        [update] = updates.json()["items"]
        assert update["data"]["operation"] == "revision"
        assert (update["data"]["from_version"], update["data"]["to_version"]) == (1, 2)
        assert set(update["data"]["evidence"]) == set(first["evidence"])

        # Focal weights from the memory's latest pass rates (step 2's summary).
        focal = await score_step(trainer, rubric_id, 4, aggregation="focal")
        stamp = memory_stamp(focal)
        assert stamp["aggregation"] == "focal"
        latest = (await admin.get(f"/v1/memory/runs/{RUN}/steps/2")).json()
        rates = {k: v for k, v in latest["stats"]["pass_rates"].items() if v is not None}
        criteria = [Criterion(**c) for c in rubric["criteria"]]
        assert list(stamp["weights"].values()) == pytest.approx(focal_weights(criteria, rates, 1.0))

        rolled = await admin.post(
            f"/v1/memory/rubrics/{rubric_id}/rollback",
            json={"version": 1, "reason": "the reword was too strict", "run_id": RUN},
        )
        assert rolled.status_code == 200, rolled.text
        body = rolled.json()
        assert body["rubric"]["version"] == 1 and body["rubric"]["current_version"] == 1
        record = body["record"]
        assert record["kind"] == "rubric_update" and record["data"]["operation"] == "rollback"
        assert (record["data"]["from_version"], record["data"]["to_version"]) == (2, 1)
        listed = await admin.get(
            "/v1/memory/records", params={"run_id": RUN, "kind": "rubric_update"}
        )
        assert listed.json()["total"] == 2
        assert (
            await trainer.post(f"/v1/memory/rubrics/{rubric_id}/rollback", json={"version": 2})
        ).status_code == 403
        after = await score_step(trainer, rubric_id, 5)
        assert memory_stamp(after)["rubric_version"] == 1


async def test_a_paused_run_is_not_revised(memory_app: Make) -> None:
    llm = ScriptedLLM(EDITS)
    app = await memory_app(llm=llm, memory_revise_every=1)
    async with client(app, TRAINER) as trainer, client(app, ADMIN) as admin:
        rubric_id = await create_rubric(trainer)
        await score_step(trainer, rubric_id, 1)
        await settle(app, admin)
        assert (await admin.post(f"/v1/memory/runs/{RUN}/pause")).status_code == 200
        await score_step(trainer, rubric_id, 2)
        await score_step(trainer, rubric_id, 3)
        assert await settle(app, admin) == []
        assert llm.editor_calls == 0
        assert (await admin.get(f"/v1/memory/runs/{RUN}")).json()["steps"] == 2


async def test_a_full_queue_drops_and_counts_without_failing_scoring(
    memory_app: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = await memory_app(llm=ScriptedLLM(EDITS), memory_queue_size=1)
    memory = memory_of(app)
    release = asyncio.Event()
    handled: list[Any] = []

    async def blocked(item: Any) -> None:
        await release.wait()
        handled.append(item)

    monkeypatch.setattr(memory.queue, "_handle", blocked)
    async with client(app, TRAINER) as trainer:
        rubric_id = await create_rubric(trainer)
        answers = [await score_step(trainer, rubric_id, step) for step in (1, 2, 3, 4)]
        for data in answers:
            assert all(r["total"] is not None for r in data["results"])
        dropped = [memory_stamp(d)["dropped"] for d in answers]
        assert dropped[:2] == [False, False] and dropped[2:] == [True, True]
        metrics = app.state.resources.metrics.render().decode()
        assert "plaudit_memory_ingest_dropped_total 2.0" in metrics
        release.set()
        await memory.drained()
        assert len(handled) == 2
