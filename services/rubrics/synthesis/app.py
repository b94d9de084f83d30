"""The rubric synthesis component (``/v1/rubrics/synthesize``, ``/v1/rubrics/instances``).

Listed before the rubrics component, so that ``/v1/rubrics/instances`` is not read as a
rubric id. The generator is the judge's backend (one model in the process, one cache).
"""

from __future__ import annotations

from services.core.components import Component
from services.core.resources import Resources
from services.datasets.store import locate
from services.judge.app import component as judge_component
from services.judge.service import JudgeService
from services.rubrics.app import component as rubrics_component
from services.rubrics.service import RubricsService
from services.rubrics.synthesis import jobs
from services.rubrics.synthesis.repository import SqlInstanceRepository
from services.rubrics.synthesis.router import router
from services.rubrics.synthesis.service import SynthesisService


def component() -> Component:
    """Rubric synthesis as a job, its instances and their export."""

    def build(resources: Resources) -> SynthesisService:
        judge = resources.services.get_or_build(JudgeService, judge_component, resources)
        rubrics = resources.services.get_or_build(RubricsService, rubrics_component, resources)
        assert resources.embedder is not None
        service = SynthesisService(
            rubrics,
            SqlInstanceRepository(resources.sessions),
            resources.embedder.embed,
            judge.cached_judge,
            resources.settings.rubrics,
            wikipedia_dir=locate(resources.settings, "wikipedia"),
        )
        jobs.register(resources.job_registry, service, resources.loaded)
        return service

    return Component(
        name="synthesis",
        router=router,
        provides=SynthesisService,
        build=build,
        needs_embedder=True,
    )
