"""Every route dependency runs on the event loop (issue 19: never the bottleneck).

FastAPI runs a plain ``def`` dependency or endpoint in its thread pool: a thread hop per
request, and one more thread contending for the GIL with the event loop. The service and
resource accessors are one-liners that never block, so they are ``async def``; a test keeps a
new plain ``def`` from slipping in.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute

from services.app import create_app
from services.core.models.embedder import Embedder
from services.core.web.deps import valid_unicode_body
from services.settings import Settings
from tests.services.judge.scripted import ScriptedBackend


def _runs_on_loop(call: Callable[..., Any]) -> bool:
    if inspect.iscoroutinefunction(call) or inspect.isasyncgenfunction(call):
        return True
    # a class instance used as a dependency runs on the loop when its __call__ is async
    return not inspect.isfunction(call) and inspect.iscoroutinefunction(type(call).__call__)


def _api_routes(routes: Iterable[Any]) -> Iterator[APIRoute]:
    """Every API route, those of included routers too (FastAPI keeps an included router as
    one entry that holds the original router)."""
    for route in routes:
        if isinstance(route, APIRoute):
            yield route
        inner = getattr(route, "original_router", None)
        if inner is not None:
            yield from _api_routes(inner.routes)


def _include_calls(routes: Iterable[Any]) -> Iterator[Callable[..., Any]]:
    """The dependencies given where a router is included, not on its routes."""
    for route in routes:
        context = getattr(route, "include_context", None)
        for depends in getattr(context, "dependencies", ()):
            yield depends.dependency
        inner = getattr(route, "original_router", None)
        if inner is not None:
            yield from _include_calls(inner.routes)


def _calls(dependant: Dependant) -> Iterator[Callable[..., Any]]:
    if dependant.call is not None:
        yield dependant.call
    for sub in dependant.dependencies:
        yield from _calls(sub)


def _name(call: Callable[..., Any]) -> str:
    return f"{getattr(call, '__module__', '?')}.{getattr(call, '__qualname__', repr(call))}"


def test_no_route_runs_a_dependency_or_endpoint_in_the_thread_pool(
    embedded_settings: Settings, embedder: Embedder
) -> None:
    app = create_app(embedded_settings, embedder=embedder, judge_backend=ScriptedBackend())
    routes = list(_api_routes(app.router.routes))
    assert len(routes) > 50  # every service is mounted
    calls = [(route.path, call) for route in routes for call in _calls(route.dependant)]
    calls += [("(app)", depends.dependency) for depends in app.router.dependencies]
    calls += [("(include)", call) for call in _include_calls(app.router.routes)]
    assert any(call is valid_unicode_body for _, call in calls)  # app-wide ones are seen
    in_pool = sorted({f"{path}: {_name(call)}" for path, call in calls if not _runs_on_loop(call)})
    assert in_pool == []
