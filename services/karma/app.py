"""The KARMA service on its own: ``uvicorn --factory services.karma.app:create_app``."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from services.core.components import Component
from services.core.resources import Resources
from services.core.settings import CoreSettings
from services.core.web.app_factory import build_app
from services.jobs.app import component as jobs_component
from services.karma import jobs
from services.karma.channels import karma_channels
from services.karma.router import router
from services.karma.service import KarmaService
from services.karma.settings import KarmaSettings


def component() -> Component:
    def build(resources: Resources) -> KarmaService:
        service = KarmaService(
            KarmaSettings.of(resources.settings),
            resources.artifacts,
            on_batch=resources.metrics.observe_batch,
            training=lambda name: jobs.training_under(resources.jobs.store, name),
        )
        resources.closers.append(service.aclose)
        jobs.register(resources.job_registry, service, resources.settings)
        return service

    return Component(
        name="karma",
        router=router,
        provides=KarmaService,
        build=build,
        channels=karma_channels,
        settings=KarmaSettings,
        jobs=(jobs.TRAIN,),
    )


def create_app(settings: CoreSettings | None = None, **collaborators: Any) -> FastAPI:
    """KARMA scoring and training, and the job API its training runs under."""
    components = [component(), jobs_component()]
    return build_app(components, settings, title="Plaudit KARMA", **collaborators)
