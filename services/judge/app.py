"""The judge service on its own: ``uvicorn --factory services.judge.app:create_app``."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI

from judges.backends.base import JudgeBackend
from services.core.app_factory import build_app
from services.core.components import Component
from services.core.model_layer import model_backend
from services.core.resources import Resources
from services.core.settings import Settings
from services.jobs.app import component as jobs_component
from services.judge import jobs
from services.judge.cached import CachedJudge
from services.judge.channels import judge_channels
from services.judge.router import router
from services.judge.service import JudgeService

log = logging.getLogger(__name__)


def component() -> Component:
    def build(resources: Resources) -> JudgeService:
        given: JudgeBackend | None = resources.extras.get("judge_backend")
        settings = resources.settings
        backend = given or model_backend(
            settings, "judge", settings.judge, on_batch=resources.metrics.observe_batch
        )
        resources.manage("judge", backend, close=given is None)  # a given one is the caller's
        judge = CachedJudge(
            backend,
            resources.cache,
            ttl=resources.settings.judge.cache_ttl_s,
            metrics=resources.metrics,
        )
        service = JudgeService(resources.settings.judge, judge, resources.scored_groups)
        jobs.register(
            resources.job_registry, service, backend, resources.settings, resources.loaded
        )
        return service

    return Component(
        name="judge", router=router, provides=JudgeService, build=build, channels=judge_channels
    )


def create_app(settings: Settings | None = None, **collaborators: Any) -> FastAPI:
    """The judge and the job API its evaluations run under."""
    components = [component(), jobs_component()]
    return build_app(components, settings, title="Plaudit judge", **collaborators)
