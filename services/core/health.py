"""Liveness, readiness, Prometheus metrics and run audit routes, present in every app."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, Response

from services.core.auth import require_scope, scope_dependency
from services.core.deps import ResourcesDep
from services.core.errors import BackendUnavailable
from services.core.schemas import ScoredGroupOut, ScoredGroupPage
from services.core.settings import Scope, Settings

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
        raise BackendUnavailable(f"not ready: {', '.join(failing)}", retry_after=2)
    return {"status": "ready", "checks": checks}


def _metrics_scope(settings: Settings) -> Scope | None:
    needed = settings.security.metrics_scope
    return Scope(needed) if needed is not None else None


@router.get(
    "/metrics",
    tags=["health"],
    include_in_schema=False,
    dependencies=[Depends(scope_dependency(_metrics_scope))],
)
async def metrics(request: Request) -> Response:
    body = request.app.state.metrics.render()
    return Response(body, media_type="text/plain; version=0.0.4; charset=utf-8")


@router.get(
    "/v1/runs/{run_id:path}/groups",
    tags=["runs"],
    dependencies=[Depends(require_scope(Scope.reward))],
)
async def run_groups(
    run_id: str,
    resources: ResourcesDep,
    step: Annotated[int | None, Query(ge=0)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> ScoredGroupPage:
    """Every group scored for ``run_id`` (in the order they were scored), for audits."""
    rows = await resources.scored_groups.list_for_run(
        run_id, step=step, limit=limit + 1, offset=offset
    )
    groups = [
        ScoredGroupOut(
            id=r.id,
            run_id=r.run_id,
            step=r.step,
            service=r.service,
            group_id=r.group_id,
            request_hash=r.request_hash,
            result=r.result,
            created_at=r.created_at.isoformat(),
        )
        for r in rows[:limit]
    ]
    next_offset = offset + limit if len(rows) > limit else None
    return ScoredGroupPage(run_id=run_id, groups=groups, next_offset=next_offset)
