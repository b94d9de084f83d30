"""The diversity service on its own: ``uvicorn --factory services.diversity.app:create_app``."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from services.core.app_factory import build_app
from services.core.components import Component
from services.core.resources import Resources
from services.core.settings import Settings
from services.diversity.channels import diversity_channels
from services.diversity.router import router
from services.diversity.service import DiversityService


def component() -> Component:
    def build(resources: Resources) -> DiversityService:
        assert resources.embedder is not None
        return DiversityService(
            resources.settings.diversity, resources.embedder, resources.scored_groups
        )

    return Component(
        name="diversity",
        router=router,
        provides=DiversityService,
        build=build,
        needs_embedder=True,
        channels=diversity_channels,
    )


def create_app(settings: Settings | None = None, **collaborators: Any) -> FastAPI:
    return build_app([component()], settings, title="Plaudit diversity", **collaborators)
