"""FastAPI accessors: routes reach services and shared resources through these one-liners."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Header, Request

from services.core.errors import BackendUnavailable
from services.core.resources import Resources


def get_resources(request: Request) -> Resources:
    resources: Resources | None = getattr(request.app.state, "resources", None)
    if resources is None:
        raise BackendUnavailable("the service is starting", retry_after=2)
    return resources


def service_of(request: Request, name: str) -> Any:
    """The service object built for component ``name``."""
    get_resources(request)
    return request.app.state.services[name]


ResourcesDep = Annotated[Resources, Depends(get_resources)]
IdempotencyKey = Annotated[
    str | None,
    Header(alias="Idempotency-Key", max_length=200, description="replay-safe retries"),
]
