"""The artifacts admin API on its own: ``uvicorn --factory services.artifacts.app:create_app``."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from services.artifacts.router import router
from services.artifacts.service import ArtifactAdminService
from services.core.components import Component
from services.core.resources import Resources
from services.core.settings import CoreSettings
from services.core.web.app_factory import build_app


def component() -> Component:
    def build(resources: Resources) -> ArtifactAdminService:
        return ArtifactAdminService(resources.artifacts)

    return Component(name="store", router=router, provides=ArtifactAdminService, build=build)


def create_app(settings: CoreSettings | None = None, **collaborators: Any) -> FastAPI:
    return build_app([component()], settings, title="Plaudit artifacts", **collaborators)
