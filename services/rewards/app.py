"""The rewards component: composite group rewards over the channels every service adds.

The channels (judge, diversity, ...) come from the components built in the same process; alone,
the rewards component builds the judge and diversity services it needs through their own
components.
"""

from __future__ import annotations

from fastapi import APIRouter

from services.core.components import Component
from services.core.resources import Resources
from services.diversity.app import component as diversity_component
from services.diversity.service import DiversityService
from services.judge.app import component as judge_component
from services.judge.service import JudgeService
from services.rewards import rescore_route
from services.rewards.groups import RewardGroups
from services.rewards.named import NamedSpecs
from services.rewards.rescore import RESCORE
from services.rewards.rescore import register as register_rescore
from services.rewards.router import router as rewards_router
from services.rewards.run_metrics import RunMetrics
from services.rewards.service import RewardsService
from services.rewards.spec_schema import show_spec


def component() -> Component:
    """``/v1/rewards``: composite group rewards over every registered channel."""

    def build(resources: Resources) -> RewardsService:
        resources.services.get_or_build(JudgeService, judge_component, resources)
        resources.services.get_or_build(DiversityService, diversity_component, resources)
        specs = NamedSpecs(resources.artifacts, resources.channels)
        service = RewardsService(
            resources.channels,
            RewardGroups(resources.sessions),
            specs,
            store_texts=resources.settings.store_texts,
            run_metrics=RunMetrics(resources.metrics.registry),
        )
        register_rescore(resources.job_registry, service, RewardGroups(resources.sessions))
        return service

    routes = APIRouter()
    routes.include_router(rewards_router)
    routes.include_router(rescore_route.router)  # POST /v1/runs/{run_id}/rescore
    return Component(
        name="rewards",
        router=routes,
        provides=RewardsService,
        build=build,
        needs_embedder=True,
        jobs=(RESCORE,),
        openapi=lambda schema, resources: show_spec(schema, resources.channels),
    )
