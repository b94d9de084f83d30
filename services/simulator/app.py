"""The simulator on its own: ``uvicorn --factory services.simulator.app:create_app``."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from judges.backends.base import JudgeBackend
from judges.backends.settings import resolve_role
from services.core.components import Component
from services.core.models.layer import model_backend
from services.core.resources import Resources
from services.core.settings import CoreSettings
from services.core.web.app_factory import build_app
from services.jobs.app import component as jobs_component
from services.judge.settings import JudgeSettings
from services.simulator import jobs
from services.simulator.router import router
from services.simulator.service import SimulatorService
from services.simulator.settings import SimulatorSettings


def base_backend(resources: Resources) -> tuple[JudgeBackend, bool]:
    """The uncalibrated simulator's model and whether this service owns (closes) it."""
    settings = resources.settings
    given: JudgeBackend | None = resources.extras.get("simulator_backend")
    if given is not None:
        return given, False
    observe = resources.metrics.observe_batch
    own = resolve_role(SimulatorSettings.of(settings).llm, JudgeSettings.of(settings))
    if own is not None:
        return model_backend(settings, "simulator", own, on_batch=observe), True
    shared = resources.models.get("judge") or resources.extras.get("judge_backend")
    if isinstance(shared, JudgeBackend):
        return shared, False
    # The simulator served without the judge: the judge's model, built for the simulator.
    return model_backend(settings, "judge", JudgeSettings.of(settings), on_batch=observe), True


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
        settings=SimulatorSettings,
        jobs=(jobs.CALIBRATE,),
    )


def create_app(settings: CoreSettings | None = None, **collaborators: Any) -> FastAPI:
    """The simulator and the job API its calibrations run under."""
    components = [component(), jobs_component()]
    return build_app(components, settings, title="Plaudit simulator", **collaborators)
