"""The ordinal service on its own: ``uvicorn --factory services.ordinal.app:create_app``."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from services.core.components import Component
from services.core.resources import Resources
from services.core.settings import CoreSettings
from services.core.web.app_factory import build_app
from services.ordinal.router import router
from services.ordinal.service import OrdinalService
from services.ordinal.settings import OrdinalSettings


def component() -> Component:
    def build(resources: Resources) -> OrdinalService:
        return OrdinalService(
            OrdinalSettings.of(resources.settings),
            resources.scored_groups,
            offload_min_values=resources.settings.limits.offload_min_values,
        )

    return Component(
        name="ordinal",
        router=router,
        provides=OrdinalService,
        build=build,
        settings=OrdinalSettings,
    )


def create_app(settings: CoreSettings | None = None, **collaborators: Any) -> FastAPI:
    from services.runs.app import component as runs_component  # its runs, listed

    return build_app(
        [component(), runs_component()], settings, title="Plaudit ordinal", **collaborators
    )
