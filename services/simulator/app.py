"""The simulator on its own: ``uvicorn --factory services.simulator.app:create_app``."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from judges.backends.base import JudgeBackend
from services.core.app_factory import build_app
from services.core.components import Component
from services.core.resources import Resources
from services.core.settings import Settings
from services.jobs.app import component as jobs_component
from services.simulator import jobs
from services.simulator.router import router
from services.simulator.service import SimulatorService


def base_backend(resources: Resources) -> tuple[JudgeBackend, bool]:
    """The uncalibrated simulator's model and whether this service owns (closes) it."""
    settings = resources.settings
    kind = settings.simulator.backend
    given: JudgeBackend | None = resources.extras.get("simulator_backend")
    if given is not None:
        return given, False
    if kind == "judge":
        shared = resources.models.get("judge") or resources.extras.get("judge_backend")
        if isinstance(shared, JudgeBackend):
            return shared, False
        from services.judge.backend_factory import make_backend

        return make_backend(settings, on_batch=resources.metrics.observe_batch), True
    if kind == "openai":
        from judges.backends.openai_backend import OpenAIBackend, OpenAIConfig

        if not settings.simulator.base_url:
            raise ValueError("the openai simulator backend needs PLAUDIT_SIMULATOR_BASE_URL")
        config = OpenAIConfig(
            settings.simulator.base_url,
            settings.simulator.model or "",
            api_key=settings.simulator.api_key,
        )
        return OpenAIBackend(config), True
    from judges.backends.local import LocalBackend

    judge = settings.judge
    local = LocalBackend(
        settings.simulator.model,
        cache_dir=settings.models_dir,
        max_batch_size=judge.max_batch_size,
        max_input_tokens=judge.max_input_tokens,
        on_batch=resources.metrics.observe_batch,
    )
    return local, True


def component() -> Component:
    def build(resources: Resources) -> SimulatorService:
        backend, owned = base_backend(resources)
        service = SimulatorService(
            resources.settings,
            resources.artifacts,
            resources.embedder,
            backend,
            loaded=resources.loaded,
        )
        resources.closers.append(service.aclose)
        if owned:  # its own model loads in the background with the others
            resources.manage("simulator", backend)
        jobs.register(resources.job_registry, service, resources.settings)
        return service

    return Component(
        name="simulator",
        router=router,
        provides=SimulatorService,
        build=build,
        needs_embedder=True,
    )


def create_app(settings: Settings | None = None, **collaborators: Any) -> FastAPI:
    """The simulator and the job API its calibrations run under."""
    components = [component(), jobs_component()]
    return build_app(components, settings, title="Plaudit simulator", **collaborators)
