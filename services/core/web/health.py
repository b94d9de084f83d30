"""Liveness, readiness, Prometheus metrics and run audit routes, present in every app."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request, Response

from services.core.errors import BackendUnavailable
from services.core.settings import CoreSettings, Scope
from services.core.web.auth import scope_dependency

router = APIRouter()


@router.get("/health/live", tags=["health"])
async def live() -> dict[str, str]:
    """The process answers."""
    return {"status": "ok"}


@router.get("/health/ready", tags=["health"])
async def ready(request: Request) -> dict[str, object]:
    """200 once models are loaded and the database answers; 503 before."""
    resources = getattr(request.app.state, "resources", None)
    if resources is None:
        raise BackendUnavailable("starting up", retry_after=2)
    checks = await resources.readiness()
    failing = sorted(name for name, ok in checks.items() if not ok)
    if failing:
        reasons = resources.not_ready_reasons()
        named = (f"{name} ({reasons[name]})" if name in reasons else name for name in failing)
        raise BackendUnavailable(f"not ready: {', '.join(named)}", retry_after=2)
    return {"status": "ready", "checks": checks}


def _metrics_scope(settings: CoreSettings) -> tuple[Scope, ...] | None:
    """What /metrics needs: the series carry every tenant's run ids, so with keys set an
    admin key unless the operator chose otherwise (issue 23)."""
    needed = settings.security.metrics_scope
    if needed == "open":
        return None
    if needed is None:
        return (Scope.admin,) if settings.api_keys else None
    return (Scope(needed),)


@router.get(
    "/metrics",
    tags=["health"],
    include_in_schema=False,
    dependencies=[Depends(scope_dependency(_metrics_scope))],
)
async def metrics(request: Request) -> Response:
    body = request.app.state.metrics.render()
    return Response(body, media_type="text/plain; version=0.0.4; charset=utf-8")
