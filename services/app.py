"""The all-in-one app: every built service in one process (the embedded default)."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from services.admin.app import component as admin_component
from services.artifacts.app import component as store_component
from services.core.components import Component
from services.core.settings import CoreSettings
from services.core.web.app_factory import build_app
from services.diversity.app import component as diversity_component
from services.jobs.app import component as jobs_component
from services.judge.app import component as judge_component
from services.karma.app import component as karma_component
from services.memory.app import component as memory_component
from services.ordinal.app import component as ordinal_component
from services.protocols.app import component as protocols_component
from services.rewards.app import component as rewards_component
from services.rubrics.app import component as rubrics_component
from services.rubrics.synthesis.app import component as synthesis_component
from services.runs.app import component as runs_component
from services.simulator.app import component as simulator_component


def components() -> list[Component]:
    """Every service this build ships, in the order they appear in the docs: the app, the
    settings (``services.settings``) and ``plaudit worker`` are all made from this list."""
    return [
        ordinal_component(),
        diversity_component(),
        judge_component(),
        rubrics_component(),
        synthesis_component(),
        karma_component(),
        simulator_component(),
        rewards_component(),
        protocols_component(),
        memory_component(),
        store_component(),
        jobs_component(),
        runs_component(),
        admin_component(),
    ]


def create_app(settings: CoreSettings | None = None, **collaborators: Any) -> FastAPI:
    return build_app(components(), settings, title="Plaudit", **collaborators)
