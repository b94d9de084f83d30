"""The rewards component: it composes the judge and diversity services of the same process.

``components()`` in ``services.app`` wraps those two with :func:`shared`, so the
rewards service reuses the very objects (and the judge model) they built; alone, it builds
its own through their components.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

from services.core.components import Component
from services.core.resources import Resources
from services.diversity.app import component as diversity_component
from services.diversity.service import DiversityService
from services.judge.app import component as judge_component
from services.judge.service import JudgeService
from services.rewards.channels import ChannelRunner
from services.rewards.router import router
from services.rewards.service import RewardsService
from services.rewards.store import RewardGroups

T = TypeVar("T")


def _key(name: str) -> str:
    # A colon keeps these apart from collaborators passed to create_app as keyword arguments.
    return f"service:{name}"


def shared(component: Component) -> Component:
    """The same component, whose built service later components can reuse.

    Example: ``[shared(judge_component()), component()]``.
    """

    def build(resources: Resources) -> Any:
        service = component.build(resources)
        resources.extras[_key(component.name)] = service
        return service

    return dataclasses.replace(component, build=build)


def reuse(resources: Resources, kind: type[T], make: Callable[[], Component]) -> T:
    """The service a :func:`shared` component built earlier, or a new one built now."""
    found = resources.extras.get(_key(make().name))
    if isinstance(found, kind):
        return found
    built = make().build(resources)
    assert isinstance(built, kind)
    return built


def component() -> Component:
    """``/v1/rewards``: composite group rewards over the judge and diversity services."""

    def build(resources: Resources) -> RewardsService:
        judge = reuse(resources, JudgeService, judge_component)
        diversity = reuse(resources, DiversityService, diversity_component)
        return RewardsService(ChannelRunner(judge, diversity), RewardGroups(resources.sessions))

    return Component(name="rewards", router=router, build=build, needs_embedder=True)
