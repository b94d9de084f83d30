"""Synthesis with the real embedded generator and judge (SmolLM2-135M, constrained decoding)
on a few documents: whatever the 135M model makes of them, every candidate is accounted for
by stage (kept + rejected per stage = documents), stored and listed with its reason."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from plaudit_wire.synthesis import STAGES, SynthesizeRequest
from services.app import create_app
from services.core.models.embedder import Embedder
from services.rubrics.synthesis.generator import CANDIDATE_SCHEMA
from services.rubrics.synthesis.service import SynthesisService
from services.settings import Settings
from tests.services.rubrics.synth_docs import DOCS

pytestmark = pytest.mark.slow


async def test_every_candidate_of_the_real_generator_is_accounted_for(
    embedded_settings: Settings, embedder: Embedder, judge_backend: Any
) -> None:
    documents = [DOCS[0], DOCS[3], DOCS[4]]  # two that pass the filter, one that does not
    app = create_app(embedded_settings, embedder=embedder, judge_backend=judge_backend)
    stages: list[str] = []

    async def progress(done: int, total: int, stage: str) -> None:
        assert 0 <= done <= total == len(documents)
        stages.append(stage)

    async with app.router.lifespan_context(app):
        service = app.state.resources.services.require(SynthesisService)
        request = SynthesizeRequest(documents=documents, max_new_tokens=384)
        result = await service.run(request, "real-synthesis", progress)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as api:
            listed = (await api.get("/v1/rubrics/instances?job_id=real-synthesis")).json()

    info = judge_backend.info
    assert result.generator == {"backend": info.name, "model": info.model_id}
    counts = {s.stage: s for s in result.stages}
    assert list(counts) == list(STAGES)
    assert result.kept + sum(s.rejected for s in result.stages) == len(documents)
    entered = len(documents)
    for stage in STAGES:  # each stage takes in what the one before it let through
        assert counts[stage].entered == entered
        assert sum(counts[stage].reasons.values()) == counts[stage].rejected
        entered -= counts[stage].rejected
    assert entered == result.kept
    assert counts["filter"].rejected == 1
    assert listed["total"] == len(documents)
    for item in listed["items"]:
        if item["status"] == "rejected":
            assert item["stage"] in STAGES and item["reason"]
        else:
            assert item["rubric_id"] and item["stage"] is None
        generated = item["candidate"]["generated"]
        if generated is not None:  # what reached stage 4 followed the schema
            assert set(generated) == set(CANDIDATE_SCHEMA["required"])
    assert stages[0] == "filtering documents" and stages[-1] == "storing"
    assert "generating instances" in stages
