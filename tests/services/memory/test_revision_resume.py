"""A revision whose attempt ended after the analyst's call resumes from its checkpoint (issue
23): the stored rollout analyses are used again, the analyst is not asked again and no
analysis is stored twice. Both set-ups, the real judge and embedder; a scripted editor that
fails its first call (the attempt that "died" after stage 1)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from judges.backends.base import GenerateRequest, GenerateResult
from services.core.jobs.context import JobContext
from services.memory.revision import REVISE
from services.settings import Settings
from tests.services.memory.conftest import ADMIN, TRAINER, Make, client
from tests.services.memory.helpers import RUN, create_rubric, score_step, settle
from tests.services.memory.scripted import ScriptedLLM


@pytest.fixture(params=["embedded", "postgres"])
def memory_settings(request: pytest.FixtureRequest) -> Settings:
    """Both set-ups: SQLite, and Postgres (jobs in-process on each)."""
    name = "embedded_settings" if request.param == "embedded" else "pg_settings"
    settings: Settings = request.getfixturevalue(name)
    return settings


EDIT = [{"op": "reword", "id": "c2", "text": "Gives the boiling point in degrees", "weight": 0}]


class EditorDownOnce(ScriptedLLM):
    """The scripted analyst and editor; the editor's first call fails."""

    def __init__(self) -> None:
        super().__init__([EDIT])
        self.editor_failed = False

    async def __call__(self, requests: Sequence[GenerateRequest]) -> list[GenerateResult]:
        editing = any("operations" in (r.json_schema or {}).get("properties", {}) for r in requests)
        if editing and not self.editor_failed:
            self.editor_failed = True
            raise RuntimeError("the editor's process died")
        return await super().__call__(requests)


async def _analyses(admin: Any) -> list[str]:
    found = await admin.get(
        "/v1/memory/records", params={"run_id": RUN, "kind": "rollout_analysis"}
    )
    return sorted(r["id"] for r in found.json()["items"])


async def test_a_revision_retried_after_its_analyses_does_not_analyse_again(
    memory_app: Make,
) -> None:
    llm = EditorDownOnce()
    app = await memory_app(llm=llm, memory_revise_every=1, memory_max_flip_rate=1.0)
    async with client(app, TRAINER) as trainer, client(app, ADMIN) as admin:
        rubric_id = await create_rubric(trainer)
        await score_step(trainer, rubric_id, 1)
        await score_step(trainer, rubric_id, 2)
        [failed] = await settle(app, admin)
        assert failed["state"] == "failed" and "died" in failed["reason"], failed
        analysed = await _analyses(admin)
        assert analysed and llm.analyst_calls == len(analysed)
        resources = app.state.resources
        job = await resources.jobs.store.get(failed["job_id"])
        assert job is not None
        assert (
            job.checkpoint == {"analyses": analysed}
            or sorted(job.checkpoint["analyses"]) == analysed
        )

        # The retry a dead process's job gets: the same job, attempt 2, from its checkpoint.
        ctx = JobContext(
            job.id,
            REVISE,
            None,
            "test:retry",
            resources.jobs.store,
            attempt=2,
            checkpoint=job.checkpoint,
        )
        outcome = await resources.job_registry.get(REVISE)(ctx, job.params)

        assert outcome["state"] == "applied", outcome
        assert llm.analyst_calls == len(analysed), "the analyst was asked again"
        assert await _analyses(admin) == analysed, "an analysis was stored twice"
        [revision] = await settle(app, admin)
        assert revision["id"] == failed["id"] and revision["state"] == "applied", revision
