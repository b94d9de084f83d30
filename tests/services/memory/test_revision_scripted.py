"""The applied and held paths of revision with a scripted editor (the real judge and embedder
still score, embed and guard), focal weights fed by the memory, the recorded rollback, and a
full ingest queue that drops without failing scoring. Real Postgres."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from plaudit_wire.rubrics import Criterion
from services.rubrics.aggregate import focal_weights
from tests.services.memory.conftest import ADMIN, TRAINER, Make, client, memory_of
from tests.services.memory.helpers import RUN, create_rubric, memory_stamp, score_step, settle
from tests.services.memory.scripted import ScriptedLLM

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
        # Issue 24: the guard's re-scoring is timed, so the overhead bench can show it apart.
        guard = first["detail"]["flips"]
        assert isinstance(guard["seconds"], float) and guard["seconds"] > 0
        # Issue 21: the job ended showing "3/5 editing"; it ends at 5/5 with the outcome.
        progress = (await admin.get(f"/v1/jobs/{first['job_id']}")).json()["progress"]
        assert (progress["done"], progress["total"], progress["stage"]) == (5, 5, "applied")
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
        progress = (await admin.get(f"/v1/jobs/{second['job_id']}")).json()["progress"]
        assert (progress["done"], progress["total"], progress["stage"]) == (5, 5, "held")
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

        # A reason longer than the store's 500-character event note: the memory's record keeps
        # it whole, the rubric's history its first 500 characters.
        reason = "the reword was too strict; " * 26
        rolled = await admin.post(
            f"/v1/memory/rubrics/{rubric_id}/rollback",
            json={"version": 1, "reason": reason, "run_id": RUN},
        )
        assert rolled.status_code == 200, rolled.text
        body = rolled.json()
        assert body["rubric"]["version"] == 1 and body["rubric"]["current_version"] == 1
        record = body["record"]
        assert record["kind"] == "rubric_update" and record["data"]["operation"] == "rollback"
        assert record["text"].endswith(reason)
        history = (await admin.get(f"/v1/artifacts/{rubric_id}/history")).json()
        assert history["items"][0]["note"] == reason[:500]
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
        assert 'plaudit_memory_ingest_dropped_total{reason="queue_full"} 2.0' in metrics
        release.set()
        await memory.drained()
        assert len(handled) == 2


async def test_trainers_that_score_elsewhere_post_their_steps(memory_app: Make) -> None:
    app = await memory_app(llm=ScriptedLLM(EDITS), memory_revise_every=100)
    async with client(app, TRAINER) as trainer, client(app, ADMIN) as admin:
        rubric_id = await create_rubric(trainer)
        group = {
            "prompt": "Why does water boil sooner up a mountain?",
            "completions": ["Lower air pressure.", "It is colder.", "Pressure drops, so it boils."],
            "rewards": [1.0, -0.5, 0.8],
            "verdicts": [
                {"c1": 0.9, "c2": 0.2, "c3": 0.1},
                {"c1": 0.1, "c2": 0.3, "c3": 0.9},
                {"c1": 0.8, "c2": None, "c3": 0.2},
            ],
        }
        body = {"rubric_id": f"{rubric_id}@1", "groups": [group, group], "close": True}
        answer = await trainer.post("/v1/memory/runs/elsewhere/steps/7", json=body)
        assert answer.status_code == 202, answer.text
        assert answer.json() == {"run_id": "elsewhere", "step": 7, "accepted": 2, "dropped": 0}
        await settle(app, admin, "elsewhere")
        [summary] = (await admin.get("/v1/memory/runs/elsewhere/steps")).json()["items"]
        stats = summary["stats"]
        assert (summary["step"], stats["groups"], stats["completions"]) == (7, 2, 6)
        assert stats["reward_mean"] == pytest.approx(1.3 / 3)
        assert stats["pass_rates"]["c1"] == pytest.approx(1.8 / 3)
        assert stats["pass_rates"]["c2"] == pytest.approx(0.25)
        assert stats["pass_rates"]["c3"] == pytest.approx((0.9 + 0.1 + 0.8) / 3)
        assert stats["non_separating"] == ["c2"] and stats["saturated"] == []
        bad = {**body, "groups": [{**group, "rewards": [1.0]}]}
        assert (
            await trainer.post("/v1/memory/runs/elsewhere/steps/8", json=bad)
        ).status_code == 422
        unknown = {**body, "rubric_id": "rb_00"}
        assert (await trainer.post("/v1/memory/runs/x/steps/1", json=unknown)).status_code == 422


async def test_twenty_concurrent_retries_of_an_ingest_count_its_groups_once(
    memory_app: Make,
) -> None:
    """A trainer's retries with one Idempotency-Key (here 20 at once) queue the step's groups
    once: every answer is the first one, and the step summary counts each group once."""
    app = await memory_app(llm=ScriptedLLM(EDITS), memory_revise_every=100)
    async with client(app, TRAINER) as trainer, client(app, ADMIN) as admin:
        rubric_id = await create_rubric(trainer)
        group = {
            "prompt": "Why does water boil sooner up a mountain?",
            "completions": ["Lower air pressure.", "It is colder."],
            "rewards": [1.0, -0.5],
            "verdicts": [{"c1": 0.9, "c2": 0.2, "c3": 0.1}, {"c1": 0.1, "c2": 0.3, "c3": 0.9}],
        }
        body = {"rubric_id": f"{rubric_id}@1", "groups": [group, group], "close": True}
        headers = {"Idempotency-Key": "step-3-attempt"}
        answers = await asyncio.gather(
            *(
                trainer.post("/v1/memory/runs/retried/steps/3", json=body, headers=headers)
                for _ in range(20)
            )
        )
        assert {a.status_code for a in answers} == {202}, [a.text for a in answers]
        expected = {"run_id": "retried", "step": 3, "accepted": 2, "dropped": 0}
        assert all(a.json() == expected for a in answers)
        await settle(app, admin, "retried")
        [summary] = (await admin.get("/v1/memory/runs/retried/steps")).json()["items"]
        assert (summary["stats"]["groups"], summary["stats"]["completions"]) == (2, 4)
        other = await trainer.post(
            "/v1/memory/runs/retried/steps/4", json={**body, "close": False}, headers=headers
        )
        assert other.status_code == 409, "one key, another body: refused, not replayed"


async def test_reward_hacking_is_flagged_on_the_run(memory_app: Make) -> None:
    app = await memory_app(llm=ScriptedLLM(EDITS), memory_revise_every=100)

    def step(lengths: list[int], rewards: list[float], c2: float) -> dict[str, Any]:
        verdicts = [{"c1": 0.9, "c2": c2, "c3": 0.1} for _ in lengths]
        group = {
            "prompt": "Q?",
            "completions": ["word " * n for n in lengths],
            "rewards": rewards,
            "verdicts": verdicts,
        }
        return {"groups": [group], "close": True}

    async with client(app, TRAINER) as trainer, client(app, ADMIN) as admin:
        rubric_id = await create_rubric(trainer)
        shapes = [
            ([10, 40, 20], [0.9, 0.1, 0.5], 0.4),  # longer is not better
            ([30, 10, 20], [0.2, 0.8, 0.5], 0.6),
            ([5, 20, 60], [0.1, 0.5, 0.9], 0.95),  # c2 ("Mentions ...") saturates, length pays
        ]
        for number, (lengths, rewards, c2) in enumerate(shapes, start=1):
            body = {"rubric_id": rubric_id, **step(lengths, rewards, c2)}
            answer = await trainer.post(f"/v1/memory/runs/hack/steps/{number}", json=body)
            assert answer.status_code == 202
            await settle(app, admin, "hack")
            flags = (await admin.get("/v1/memory/runs/hack")).json()["flags"]
            assert len(flags) == (1 if number == 3 else 0), flags
        [flag] = flags
        assert flag["kind"] == "reward_hacking" and flag["step"] == 3
        assert "c2" in flag["detail"] and "correlation" in flag["detail"]
