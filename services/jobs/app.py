"""The job API on its own: ``uvicorn --factory services.jobs.app:create_app``."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from services.core.components import Component
from services.core.resources import Resources
from services.core.settings import CoreSettings
from services.core.web.app_factory import build_app
from services.jobs.probe import PROBE, run_probe
from services.jobs.router import router
from services.jobs.service import JobsService


def component() -> Component:
    def build(resources: Resources) -> JobsService:
        resources.job_registry.register(PROBE, run_probe)
        return JobsService(resources.jobs)

    return Component(
        name="jobs",
        router=router,
        provides=JobsService,
        build=build,
        jobs=(PROBE,),
    )


def create_app(settings: CoreSettings | None = None, **collaborators: Any) -> FastAPI:
    return build_app([component()], settings, title="Plaudit jobs", **collaborators)
