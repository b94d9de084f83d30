"""FastAPI accessors: routes reach services and shared resources through these one-liners."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any, TypeVar

from fastapi import Depends, Header, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from services.core.auth import principal_of
from services.core.errors import BackendUnavailable
from services.core.idempotency import ReplayKey
from services.core.resources import Resources

T = TypeVar("T")


def get_resources(request: Request) -> Resources:
    resources: Resources | None = getattr(request.app.state, "resources", None)
    if resources is None:
        raise BackendUnavailable("the service is starting", retry_after=2)
    return resources


def service_of(request: Request, kind: type[T]) -> T:
    """The ``kind`` service this process built (``service_of(request, JudgeService)``)."""
    return get_resources(request).services.require(kind)


ResourcesDep = Annotated[Resources, Depends(get_resources)]


def _replay_key(
    request: Request,
    key: Annotated[
        str | None,
        Header(
            alias="Idempotency-Key",
            min_length=1,
            max_length=200,
            description="replay-safe retries: a retry with the same key and body gets the "
            "stored answer, also while the first request is still running; scoped to the API "
            "key and the route",
        ),
    ] = None,
) -> ReplayKey | None:
    return None if key is None else ReplayKey(key, principal_of(request))


IdempotencyKey = Annotated[ReplayKey | None, Depends(_replay_key)]


async def replayable(
    resources: Resources,
    key: ReplayKey | None,
    endpoint: str,
    body: BaseModel,
    score: Callable[[], Awaitable[BaseModel | dict[str, Any]]],
) -> JSONResponse:
    """Run ``score`` once per Idempotency-Key; a retry with the same body gets the stored answer.

    Concurrent duplicates wait for the first request and replay its answer (see
    :mod:`services.core.idempotency`).

    The answer is returned as JSON directly: it was built by the service, not parsed, so it is
    not validated a second time on the way out.
    """

    async def compute() -> dict[str, Any]:
        result = await score()
        return result if isinstance(result, dict) else result.model_dump()

    return JSONResponse(await resources.idempotency.run(key, endpoint, body.model_dump(), compute))
