"""The judge service on its own: ``uvicorn --factory services.judge.app:create_app``."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI

from services.core.app_factory import build_app
from services.core.components import Component
from services.core.resources import Resources
from services.core.settings import Settings
from services.jobs.app import component as jobs_component
from services.judge import jobs
from services.judge.backend_factory import is_started, make_backend
from services.judge.cached import CachedJudge
from services.judge.router import router
from services.judge.service import JudgeService

log = logging.getLogger(__name__)


def component() -> Component:
    def build(resources: Resources) -> JudgeService:
        backend = resources.extras.get("judge_backend") or make_backend(resources.settings)
        start = getattr(backend, "start", None)
        if start is not None and not is_started(backend):
            resources.loaders.append(start)
        close = getattr(backend, "aclose", None)
        if close is not None and "judge_backend" not in resources.extras:
            resources.closers.append(close)
        resources.checks["judge"] = lambda: is_started(backend)
        judge = CachedJudge(
            backend,
            resources.cache,
            ttl=resources.settings.judge_cache_ttl_s,
            metrics=resources.metrics,
        )
        service = JudgeService(resources.settings, judge, resources.scored_groups)
        jobs.register(
            resources.job_registry, service, backend, resources.settings, resources.loaded
        )
        return service

    return Component(name="judge", router=router, build=build)


def create_app(settings: Settings | None = None, **collaborators: Any) -> FastAPI:
    """The judge and the job API its evaluations run under."""
    components = [component(), jobs_component()]
    return build_app(components, settings, title="Plaudit judge", **collaborators)
