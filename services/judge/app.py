"""The judge service on its own: ``uvicorn --factory services.judge.app:create_app``."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI

from judges.backends.base import JudgeBackend
from services.core.components import Component
from services.core.errors import InvalidInput
from services.core.models.cached_judge import CachedJudge
from services.core.models.layer import model_backend
from services.core.resources import Resources
from services.core.settings import CoreSettings, is_loopback
from services.core.web.app_factory import build_app
from services.core.web.auth import PLACEHOLDER
from services.jobs.app import component as jobs_component
from services.judge import jobs
from services.judge.channels import judge_channels
from services.judge.router import router
from services.judge.service import JudgeService
from services.judge.settings import JudgeSettings

log = logging.getLogger(__name__)


def component() -> Component:
    def build(resources: Resources) -> JudgeService:
        check_fence_secret(resources.settings)
        given: JudgeBackend | None = resources.extras.get("judge_backend")
        section = JudgeSettings.of(resources.settings)
        backend = given or model_backend(
            resources.settings, "judge", section, on_batch=resources.metrics.observe_batch
        )
        resources.manage("judge", backend, close=given is None)  # a given one is the caller's
        judge = CachedJudge(
            backend, resources.cache, ttl=section.cache_ttl_s, metrics=resources.metrics
        )
        service = JudgeService(section, judge, resources.scored_groups)
        jobs.register(
            resources.job_registry, service, backend, resources.settings, resources.loaded
        )
        return service

    return Component(
        name="judge",
        router=router,
        provides=JudgeService,
        build=build,
        channels=judge_channels,
        settings=JudgeSettings,
        landing=landing_rows,
        jobs=(jobs.EVALUATION,),
    )


def check_fence_secret(settings: CoreSettings) -> None:
    """Refuse a public server whose fence secret is an example's placeholder: anyone who read
    the example could forge the judge's fences (the compose example's ``change-me-...`` was
    accepted)."""
    secret = JudgeSettings.of(settings).fence_secret
    if secret is None or is_loopback(settings.host):
        return
    if PLACEHOLDER.search(secret.get_secret_value()):
        raise InvalidInput(
            f"refusing to listen on {settings.host!r}: PLAUDIT_JUDGE_FENCE_SECRET looks like a "
            "placeholder from an example; set a long random value (`openssl rand -hex 32`)",
            param="judge_fence_secret",
        )


def landing_rows(settings: CoreSettings) -> list[tuple[str, str]]:
    """The landing page's lines on the judge: its backend and model."""
    judge = JudgeSettings.of(settings)
    model = judge.model or ("SmolLM2-135M-Instruct (bundled)" if judge.backend == "local" else "")
    return [("judge backend", judge.backend), ("judge model", model or "(asked from the server)")]


def create_app(settings: CoreSettings | None = None, **collaborators: Any) -> FastAPI:
    """The judge and the job API its evaluations run under."""
    from services.runs.app import component as runs_component  # its runs, listed

    components = [component(), jobs_component(), runs_component()]
    return build_app(components, settings, title="Plaudit judge", **collaborators)
