"""The runs component: ``GET /v1/runs`` and ``GET /v1/runs/{run_id}/groups``."""

from __future__ import annotations

from services.core.components import Component
from services.core.resources import Resources
from services.runs.router import router
from services.runs.service import RunsService


def component() -> Component:
    def build(resources: Resources) -> RunsService:
        return RunsService(resources.scored_groups)

    return Component(name="runs", router=router, provides=RunsService, build=build)
