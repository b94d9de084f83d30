"""The ordinal service on its own: ``uvicorn --factory services.ordinal.app:create_app``."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from services.core.app_factory import build_app
from services.core.components import Component
from services.core.resources import Resources
from services.core.settings import Settings
from services.ordinal.router import router
from services.ordinal.service import OrdinalService


def component() -> Component:
    def build(resources: Resources) -> OrdinalService:
        return OrdinalService(
            resources.settings.ordinal,
            resources.scored_groups,
            offload_min_values=resources.settings.limits.offload_min_values,
        )

    return Component(name="ordinal", router=router, provides=OrdinalService, build=build)


def create_app(settings: Settings | None = None, **collaborators: Any) -> FastAPI:
    return build_app([component()], settings, title="Plaudit ordinal", **collaborators)
