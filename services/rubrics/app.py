"""The rubrics component (``/v1/rubrics``), and the service on its own:
``uvicorn --factory services.rubrics.app:create_app``.

It asks the judge the judge service was built with (one model in the process, one cache).
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from services.core.components import Component
from services.core.resources import Resources
from services.core.settings import CoreSettings
from services.core.web.app_factory import build_app
from services.judge.app import component as judge_component
from services.judge.service import JudgeService
from services.rubrics.channels import rubric_channels
from services.rubrics.judging import RubricJudge
from services.rubrics.repository import ArtifactRubricRepository
from services.rubrics.router import router
from services.rubrics.service import RubricsService
from services.rubrics.settings import RubricsSettings


def component() -> Component:
    """Rubrics: versioned rubrics, scoring, and the ``rubric`` reward channel."""

    def build(resources: Resources) -> RubricsService:
        judge = resources.services.get_or_build(JudgeService, judge_component, resources)
        settings = RubricsSettings.of(resources.settings)
        return RubricsService(
            settings,
            ArtifactRubricRepository(resources.artifacts),
            RubricJudge(judge.model, max_new_tokens=settings.generate_max_new_tokens),
            resources.scored_groups,
        )

    return Component(
        name="rubrics",
        router=router,
        provides=RubricsService,
        build=build,
        channels=rubric_channels,
        settings=RubricsSettings,
    )


def create_app(settings: CoreSettings | None = None, **collaborators: Any) -> FastAPI:
    """Rubrics, their synthesis, and the job API synthesis runs under."""
    from services.jobs.app import component as jobs_component
    from services.rubrics.synthesis.app import component as synthesis_component
    from services.runs.app import component as runs_component  # its runs, listed

    components = [component(), synthesis_component(), jobs_component(), runs_component()]
    return build_app(components, settings, title="Plaudit rubrics", **collaborators)
