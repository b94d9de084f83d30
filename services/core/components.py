"""The composition root: a service's pieces as the app factory sees them, and the typed
registry of the services a process built.

Each service folder exposes ``component()``: its router, the class of service it provides, a
builder run in the lifespan, its settings section, the job kinds and reward channels it
contributes, and what the landing page says of it. ``services/app.py`` lists the components
of this build; settings, worker and app are all made from that one list (issue 20). Services
find each other by type, never by a string::

    judge = resources.services.get_or_build(JudgeService, judge_component, resources)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from fastapi import APIRouter

from services.core.channels import Channel
from services.core.settings import CoreSettings, Section

if TYPE_CHECKING:
    from services.core.resources import Resources

T = TypeVar("T")


@dataclass(frozen=True)
class Component:
    """One service: its router, what it provides, how to build it, its settings section, the
    job kinds its build registers, the channels it adds, its rows on the landing page and
    what it adds to the OpenAPI schema."""

    name: str
    router: APIRouter
    provides: type[Any]
    build: Callable[[Resources], Any]
    needs_embedder: bool = False
    channels: Callable[[Any], Sequence[Channel]] | None = None
    settings: type[Section] | None = None
    jobs: tuple[str, ...] = ()
    landing: Callable[[CoreSettings], Sequence[tuple[str, str]]] | None = None
    #: Rewrites the app's OpenAPI schema in place with what only the started process knows
    #: (the rewards spec's channels); called with the process's resources.
    openapi: Callable[[dict[str, Any], Resources], None] | None = None


def settings_sections(components: Sequence[Component]) -> list[type[Section]]:
    """The settings sections ``components`` declare, in their order (each once)."""
    sections = [c.settings for c in components if c.settings is not None]
    return list(dict.fromkeys(sections))


class ServiceRegistry:
    """The services built in this process, by their class."""

    def __init__(self) -> None:
        self._services: dict[type[Any], Any] = {}

    def get(self, kind: type[T]) -> T | None:
        found = self._services.get(kind)
        return found if isinstance(found, kind) else None

    def require(self, kind: type[T]) -> T:
        found = self.get(kind)
        if found is None:
            raise LookupError(f"no {kind.__name__} is served by this process")
        return found

    def build(self, component: Component, resources: Resources) -> Any:
        """Build ``component`` once: a second call returns the service built first."""
        existing = self._services.get(component.provides)
        if existing is not None:
            return existing
        service = component.build(resources)
        if not isinstance(service, component.provides):
            raise TypeError(f"{component.name} built a {type(service).__name__}")
        unregistered = set(component.jobs) - set(resources.job_registry.functions)
        if unregistered:  # a worker builds the components that declare jobs (issue 20)
            raise TypeError(f"{component.name} declares jobs it did not register: {unregistered}")
        self._services[component.provides] = service
        if component.channels is not None:
            for channel in component.channels(service):
                resources.channels.add(channel)
        return service

    def get_or_build(self, kind: type[T], make: Callable[[], Component], resources: Resources) -> T:
        """The ``kind`` service built earlier, or one built now from ``make()``."""
        found = self.get(kind)
        if found is not None:
            return found
        built = self.build(make(), resources)
        assert isinstance(built, kind)
        return built
