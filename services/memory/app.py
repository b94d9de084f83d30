"""The evaluation memory component (``/v1/memory``), and the service on its own:
``uvicorn --factory services.memory.app:create_app``.

It feeds on the rubric service's adaptive channels (it connects through
``RubricsService.send_adaptive_groups_to``) and registers the ``memory.revise`` job. The
analyst and editor are the judge's model unless ``PLAUDIT_MEMORY_LLM`` gives them a backend of
their own (docs/models.md): ``local`` (a second instance of the judge's model, so a long
generation never holds up scoring on the judge's worker thread), ``vllm`` or ``openai`` (an
OpenAI-compatible server).
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from judges.backends.settings import resolve_role
from judges.generation import GenerateFn
from services.core.components import Component
from services.core.models.layer import model_backend
from services.core.resources import Resources
from services.core.settings import CoreSettings
from services.core.web.app_factory import build_app
from services.jobs.app import component as jobs_component
from services.judge.service import JudgeService
from services.judge.settings import JudgeSettings
from services.memory.repository import MemoryRepository
from services.memory.revision import REVISE
from services.memory.router import router
from services.memory.service import MemoryService
from services.memory.settings import MemorySettings
from services.rewards.app import component as rewards_component
from services.rubrics.app import component as rubrics_component
from services.rubrics.service import RubricsService


def component() -> Component:
    """AMARIS: the evaluation memory, background rubric revision and its admin API."""

    def build(resources: Resources) -> MemoryService:
        rubrics = resources.services.get_or_build(RubricsService, rubrics_component, resources)
        judge = resources.services.require(JudgeService)
        assert resources.embedder is not None
        service = MemoryService(
            MemorySettings.of(resources.settings),
            MemoryRepository(resources.sessions),
            rubrics,
            resources.embedder,
            resources.jobs,
            _llm(resources, judge),
            registry=resources.metrics.registry,
        )
        rubrics.send_adaptive_groups_to(service)
        resources.job_registry.register(REVISE, service.reviser.job)
        resources.closers.append(service.aclose)
        return service

    return Component(
        name="memory",
        router=router,
        provides=MemoryService,
        build=build,
        needs_embedder=True,
        settings=MemorySettings,
        jobs=(REVISE,),
    )


def _llm(resources: Resources, judge: JudgeService) -> GenerateFn:
    """The analyst's and editor's model: the judge's, or one of its own from the model layer."""
    given: GenerateFn | None = resources.extras.get("memory_llm")  # tests, benchmarks
    if given is not None:
        return given
    settings = resources.settings
    own = resolve_role(MemorySettings.of(settings).llm, JudgeSettings.of(settings))
    if own is None:
        cached = judge.model.cached
        return lambda requests: cached.generate(requests)
    backend = model_backend(settings, "memory", own, on_batch=resources.metrics.observe_batch)
    resources.manage("memory_llm", backend)
    return backend.generate


def create_app(settings: CoreSettings | None = None, **collaborators: Any) -> FastAPI:
    """The memory with the rubrics, rewards and job APIs it works with."""
    components = [rubrics_component(), rewards_component(), component(), jobs_component()]
    return build_app(components, settings, title="Plaudit memory", **collaborators)
