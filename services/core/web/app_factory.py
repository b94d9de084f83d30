"""Build a FastAPI app from service components; heavy objects are built in the lifespan."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

from fastapi import Depends, FastAPI

import services
from services.core.cache import Cache
from services.core.components import Component
from services.core.jobs.context import JobRegistry
from services.core.metrics import Metrics
from services.core.models.embedder import Embedder
from services.core.resources import Resources, open_resources
from services.core.settings import CoreSettings, Section, compose_settings
from services.core.web import health
from services.core.web.auth import check_startup
from services.core.web.deps import valid_unicode_body
from services.core.web.envelope import install_error_handlers
from services.core.web.guard import GuardMiddleware
from services.core.web.limits import show_limits
from services.core.web.middleware import RequestContextMiddleware
from services.core.web.openapi_errors import document_errors
from services.core.web.pages import mount_pages

log = logging.getLogger(__name__)
OpenApiHook = Callable[[dict[str, Any], Resources], None]


def build_app(
    components: Sequence[Component],
    settings: CoreSettings | None = None,
    *,
    title: str = "Plaudit",
    embedder: Embedder | None = None,
    cache: Cache | None = None,
    job_registry: JobRegistry | None = None,
    **extras: Any,
) -> FastAPI:
    """An app serving ``components`` plus health and metrics routes.

    Without ``settings``, they are read from the environment when the app starts, with the
    sections of every service this process imported (``Section.defined``). Collaborators
    passed here (an embedder, a cache, a ``judge_backend``) replace the ones built from
    settings; unnamed ones reach components through ``Resources.extras``.
    """
    metrics = Metrics()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        active = settings or compose_settings(Section.defined())()
        check_startup(active)
        app.state.settings = active
        resources = await open_resources(
            active,
            metrics,
            needs_embedder=any(c.needs_embedder for c in components),
            embedder=embedder,
            cache=cache,
            job_registry=job_registry,
            extras=extras,
        )
        for component in components:
            resources.services.build(component, resources)
        await resources.jobs.start()
        app.state.resources = resources
        resources.start_loading()
        resources.start_maintenance()
        try:
            yield
        finally:
            app.state.resources = None
            await resources.aclose()

    app = FastAPI(
        title=title,
        version=services.__version__,
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        description="Reward-model and judge services for RL post-training.",
        dependencies=[Depends(valid_unicode_body)],
    )
    app.state.metrics = metrics
    app.state.settings = settings or _deferred_settings()
    app.state.resources = None
    install_error_handlers(app)
    _show_limits_in_openapi(app, [c.openapi for c in components if c.openapi is not None])
    # Added first, so it runs inside RequestContextMiddleware (its answers carry request ids).
    app.add_middleware(GuardMiddleware, metrics=metrics)
    app.add_middleware(RequestContextMiddleware, metrics=metrics)
    app.include_router(health.router)
    mount_pages(app, components)
    for component in components:
        app.include_router(component.router)
    return app


def _show_limits_in_openapi(app: FastAPI, hooks: Sequence[OpenApiHook]) -> None:
    """The OpenAPI schema states the limits in force (maxLength of texts and so on), the
    error answers of every route, and what the components add once started (``hooks``)."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        # Every step rewrites FastAPI's cached schema in place, so repeating them is harmless.
        schema = show_limits(document_errors(generate()), app.state.settings.limits)
        if app.state.resources is not None:
            for hook in hooks:
                hook(schema, app.state.resources)
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


def _deferred_settings() -> Any:
    """Until the lifespan reads the environment, auth sees no keys configured."""
    return CoreSettings.model_construct(api_keys={})
