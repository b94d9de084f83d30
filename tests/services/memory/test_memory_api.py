"""A run scored with an adaptive rubric channel fills the memory by itself, and a revision
job with the embedded SmolLM2 as analyst and editor ends in a recorded state (real Postgres,
real judge, real embedder)."""

from __future__ import annotations

from typing import Any

import pytest

from plaudit_wire.rubrics import Criterion
from services.memory import stats as st
from tests.services.memory.conftest import ADMIN, TRAINER, Make, client
from tests.services.memory.helpers import RUN, create_rubric, memory_stamp, score_step, settle


def _expected(step_data: list[dict[str, Any]], criteria: list[Criterion]) -> st.StepStats:
    groups = [
        st.GroupVerdicts(
            rewards=[r["channels"]["rubric"]["value"] for r in data["results"]],
            verdicts=[r["channels"]["rubric"]["detail"]["criteria"] for r in data["results"]],
            lengths=[0] * len(data["results"]),
        )
        for data in step_data
    ]
    return st.step_stats(criteria, groups, saturation=0.9)


async def test_a_run_fills_the_memory_and_a_real_revision_is_recorded(memory_app: Make) -> None:
    app = await memory_app(memory_revise_every=2, memory_analyses_per_step=2)
    async with client(app, TRAINER) as trainer, client(app, ADMIN) as admin:
        rubric_id = await create_rubric(trainer)
        scored = [await score_step(trainer, rubric_id, step) for step in (1, 2, 3)]
        for data in scored:
            stamp = memory_stamp(data)
            assert stamp["ingested"] is True and stamp["dropped"] is False
            assert stamp["rubric_version"] == 1 and stamp["staleness"] is None
        revisions = await settle(app, admin)

        runs = (await admin.get("/v1/memory/runs")).json()
        assert runs["total"] == 1
        [run] = runs["items"]
        assert (run["run_id"], run["rubric_id"], run["steps"], run["last_step"]) == (
            RUN,
            rubric_id,
            2,
            3,
        )
        assert run["paused"] is False

        rubric = (await admin.get(f"/v1/rubrics/{rubric_id}@1")).json()
        criteria = [Criterion(**c) for c in rubric["criteria"]]
        detail = (await admin.get(f"/v1/memory/runs/{RUN}")).json()
        assert [p["step"] for p in detail["curve"]] == [1, 2]
        for point, data in zip(detail["curve"], scored[:2], strict=True):
            expected = _expected([data], criteria)
            assert point["reward_mean"] == pytest.approx(expected.reward_mean)
            assert point["reward_std"] == pytest.approx(expected.reward_std)
            assert point["pass_rates"] == pytest.approx(expected.pass_rates)
        assert {c["id"] for c in detail["criteria"]} >= {"c1", "c2", "c3"}

        steps = (await admin.get(f"/v1/memory/runs/{RUN}/steps")).json()
        assert [s["step"] for s in steps["items"]] == [2, 1], "newest first"
        expected = _expected([scored[1]], criteria)
        assert steps["items"][0]["stats"]["saturated"] == expected.saturated
        assert steps["items"][0]["stats"]["non_separating"] == expected.non_separating
        assert steps["items"][0]["summary"].startswith("Step 2: 3 completions in 1 groups")

        # The revision after step 2: the embedded 135M editor's proposal, however weak, ends
        # in a recorded state with its reasons and evidence.
        [revision] = revisions
        assert revision["step"] == 2 and revision["job_id"]
        assert revision["state"] in ("applied", "held", "rejected"), revision
        assert steps["items"][0]["id"] in revision["evidence"]
        if revision["state"] != "applied":
            assert revision["reason"]
        if revision["state"] == "rejected":
            assert all(not op["accepted"] and op["reason"] for op in revision["operations"])
        else:
            assert any(op["accepted"] for op in revision["operations"])
        if revision["state"] == "applied":
            current = (await admin.get(f"/v1/rubrics/{rubric_id}")).json()
            assert current["version"] == revision["to_version"] == 2
            assert current["criteria"][0] == rubric["criteria"][0], "the anchor is untouched"

        step2 = (await admin.get(f"/v1/memory/runs/{RUN}/steps/2")).json()
        assert len(step2["analyses"]) == 2
        assert {a["analyst_status"] for a in step2["analyses"]} <= {"ok", "invalid_output"}
        assert all(a["text"].startswith("Reward ") for a in step2["analyses"])

        records = (await admin.get("/v1/memory/records", params={"run_id": RUN})).json()
        kinds = {r["kind"] for r in records["items"]}
        assert {"step_summary", "rollout_analysis"} <= kinds
        summaries = await admin.get(
            "/v1/memory/records", params={"run_id": RUN, "kind": "step_summary", "step": 1}
        )
        assert summaries.json()["total"] == 1

        found = await admin.post(
            "/v1/memory/search", json={"run_id": RUN, "text": "boiling point", "budget": 5000}
        )
        assert found.status_code == 200, found.text
        body = found.json()
        assert {r["kind"] for r in body["static"]} <= {"step_summary", "rubric_update"}
        assert body["static"] and body["dynamic"]
        shown = [r["id"] for r in body["static"]] + [r["id"] for r in body["dynamic"]]
        assert len(shown) == len(set(shown)), "deduplicated"
        tight = await admin.post(
            "/v1/memory/search", json={"run_id": RUN, "text": "boiling point", "budget": 200}
        )
        assert tight.json()["used"] <= 200

        assert (await trainer.get("/v1/memory/runs")).status_code == 403
        paused = await admin.post(f"/v1/memory/runs/{RUN}/pause")
        assert paused.json() == {"run_id": RUN, "paused": True, "rubrics": [rubric_id]}
        assert (await admin.get(f"/v1/memory/runs/{RUN}")).json()["paused"] is True
        resumed = await admin.post(f"/v1/memory/runs/{RUN}/resume")
        assert resumed.json()["paused"] is False
        assert (await admin.get("/v1/memory/runs/nobody")).status_code == 404
