"""FastAPI accessors: routes reach services and shared resources through these one-liners."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any, TypeVar

from fastapi import Depends, Header, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from plaudit_wire.names import MAX_REF_LENGTH, NAME_REGEX, OWNED_REF_REGEX, REF_REGEX
from plaudit_wire.schemas import ID_PATTERN
from plaudit_wire.unicode_check import surrogate_errors
from services.core.errors import BackendUnavailable
from services.core.resources import Resources
from services.core.web.auth import principal_of
from services.core.web.idempotency import ReplayKey
from services.core.web.query_once import query_once

T = TypeVar("T")


def get_resources(request: Request) -> Resources:
    resources: Resources | None = getattr(request.app.state, "resources", None)
    if resources is None:
        raise BackendUnavailable("the service is starting", retry_after=2)
    return resources


def service_of(request: Request, kind: type[T]) -> T:
    """The ``kind`` service this process built (``service_of(request, JudgeService)``)."""
    return get_resources(request).services.require(kind)


async def _resources(request: Request) -> Resources:
    return get_resources(request)


ResourcesDep = Annotated[Resources, Depends(_resources)]

#: An id in the URL path (run ids, names, refs): 1..200 characters, no control characters.
PathId = Annotated[str, Path(min_length=1, max_length=200, pattern=ID_PATTERN)]
#: An artifact's name in the path (``helpful``), and a reference (``helpful@3``); an admin may
#: name a tenant's reward spec ``<owner>~helpful[@3]``. The schema states the rule; the service
#: checks it with its own message (store_refs).
PathName = Annotated[
    str, Path(min_length=1, max_length=128, json_schema_extra={"pattern": NAME_REGEX})
]
PathRef = Annotated[
    str, Path(min_length=1, max_length=MAX_REF_LENGTH, json_schema_extra={"pattern": REF_REGEX})
]
PathOwnedRef = Annotated[
    str,
    Path(
        min_length=1, max_length=41 + MAX_REF_LENGTH, json_schema_extra={"pattern": OWNED_REF_REGEX}
    ),
]
#: An id in the query string, with the same rule.
QueryId = Annotated[str | None, Query(min_length=1, max_length=200, pattern=ID_PATTERN)]


async def valid_unicode_body(
    request: Request, _: Annotated[None, Depends(query_once)] = None
) -> None:
    """Refuse a JSON body whose strings hold lone UTF-16 surrogates (422 naming each field).

    An app-wide dependency: it runs after FastAPI parsed the body and before the body is
    validated, so no text with a lone surrogate reaches a model batch. It depends on
    :func:`query_once`, so every route also refuses a repeated single-valued query parameter.
    """
    body = request.__dict__.get("_json")  # Starlette caches the parsed body here
    if body is not None:
        errors = surrogate_errors(body)
        if errors:
            raise RequestValidationError(errors, body=None)


async def _replay_key(
    request: Request,
    key: Annotated[
        str | None,
        Header(
            alias="Idempotency-Key",
            min_length=1,
            max_length=200,
            pattern=ID_PATTERN,
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
    :mod:`services.core.web.idempotency`).

    The answer is returned as JSON directly: it was built by the service, not parsed, so it is
    not validated a second time on the way out.
    """

    async def compute() -> dict[str, Any]:
        result = await score()
        return result if isinstance(result, dict) else result.model_dump()

    return JSONResponse(await resources.idempotency.run(key, endpoint, body.model_dump(), compute))
