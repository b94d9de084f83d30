"""The rubric synthesis component (``/v1/rubrics/synthesize``, ``/v1/rubrics/instances``).

The rubrics component's ``/{rubric_id}`` routes take only rubric ids (``rb_...``), so
``/v1/rubrics/instances`` reaches this component whatever the order of the list. The
generator is the judge's backend (one model in the process, one cache) unless
``PLAUDIT_RUBRICS_SYNTHESIS`` gives it one of its own.
"""

from __future__ import annotations

from judges.backends.settings import resolve_role
from services.core.components import Component
from services.core.models.cached_judge import CachedJudge
from services.core.models.layer import model_backend
from services.core.resources import Resources
from services.datasets.store import locate
from services.judge.app import component as judge_component
from services.judge.service import JudgeService
from services.judge.settings import JudgeSettings
from services.rubrics.app import component as rubrics_component
from services.rubrics.service import RubricsService
from services.rubrics.settings import RubricsSettings
from services.rubrics.synthesis import jobs
from services.rubrics.synthesis.repository import SqlInstanceRepository
from services.rubrics.synthesis.router import router
from services.rubrics.synthesis.service import SynthesisService


def _generator(resources: Resources, judge: JudgeService) -> CachedJudge:
    """The judge's backend and cache, or the generator's own backend (docs/models.md)."""
    settings = resources.settings
    own = resolve_role(RubricsSettings.of(settings).synthesis, JudgeSettings.of(settings))
    if own is None:
        return judge.model.cached
    observe = resources.metrics.observe_batch
    backend = model_backend(settings, "synthesis", own, on_batch=observe)
    resources.manage("synthesis", backend)
    ttl = JudgeSettings.of(settings).cache_ttl_s
    return CachedJudge(backend, resources.cache, ttl=ttl, metrics=resources.metrics)


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
            _generator(resources, judge),
            RubricsSettings.of(resources.settings),
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
        jobs=(jobs.SYNTHESIZE,),
    )
