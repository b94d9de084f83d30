"""The trainer-protocols component: OpenRLHF's and slime's reward calls over the rewards service.

``components()`` in ``services.app`` shares the rewards service with it; alone, it
builds its own (and with it the judge and diversity services).
"""

from __future__ import annotations

from services.core.components import Component
from services.core.resources import Resources
from services.protocols.router import router
from services.protocols.service import ProtocolService
from services.protocols.settings import ProtocolsSettings
from services.rewards.app import component as rewards_component
from services.rewards.service import RewardsService


def component() -> Component:
    """``/get_reward`` (OpenRLHF) and ``/slime/reward`` (slime), with group buffering."""

    def build(resources: Resources) -> ProtocolService:
        rewards = resources.services.get_or_build(RewardsService, rewards_component, resources)
        service = ProtocolService(
            rewards,
            ProtocolsSettings.of(resources.settings),
            redis_url=resources.settings.redis_url,
        )
        resources.closers.append(service.aclose)
        return service

    return Component(
        name="protocols",
        router=router,
        provides=ProtocolService,
        build=build,
        needs_embedder=True,
        settings=ProtocolsSettings,
    )
