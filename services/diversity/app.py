"""The diversity service on its own: ``uvicorn --factory services.diversity.app:create_app``."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from services.core.components import Component
from services.core.resources import Resources
from services.core.settings import CoreSettings
from services.core.web.app_factory import build_app
from services.diversity.channels import diversity_channels
from services.diversity.router import router
from services.diversity.service import DiversityService
from services.diversity.settings import DiversitySettings


def component() -> Component:
    def build(resources: Resources) -> DiversityService:
        assert resources.embedder is not None
        return DiversityService(
            DiversitySettings.of(resources.settings), resources.embedder, resources.scored_groups
        )

    return Component(
        name="diversity",
        router=router,
        provides=DiversityService,
        build=build,
        needs_embedder=True,
        channels=diversity_channels,
        settings=DiversitySettings,
    )


def create_app(settings: CoreSettings | None = None, **collaborators: Any) -> FastAPI:
    from services.runs.app import component as runs_component  # its runs, listed

    return build_app(
        [component(), runs_component()], settings, title="Plaudit diversity", **collaborators
    )
