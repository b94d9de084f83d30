"""A single-valued query parameter given twice is refused, not silently read once (issue 23).

FastAPI reads one value of a scalar query parameter (``?limit=5&limit=7`` is ``limit=5`` or
``7`` depending on the route), so a client that repeats one by mistake never learns it. Every
route's scalar query parameters are read from its dependency tree (only when some name is
repeated); a request that repeats one gets the 422 envelope naming it. A list parameter still
takes many.
"""

from __future__ import annotations

from typing import Any, get_args, get_origin

from fastapi import Request
from fastapi.dependencies.models import Dependant
from fastapi.dependencies.utils import get_flat_params
from fastapi.exceptions import RequestValidationError
from fastapi.params import Query
from fastapi.routing import APIRoute

_SEQUENCES = (list, tuple, set, frozenset)


def _takes_many(annotation: Any) -> bool:
    """Whether a parameter annotated ``annotation`` reads every value (``list[str] | None``)."""
    origin = get_origin(annotation)
    if origin in _SEQUENCES or annotation in _SEQUENCES:
        return True
    return any(_takes_many(arg) for arg in get_args(annotation) if arg is not type(None))


def single_valued(dependant: Dependant) -> frozenset[str]:
    """The query names of ``dependant``'s scalar query parameters, its dependencies' included."""
    return frozenset(
        field.alias
        for field in get_flat_params(dependant)
        if isinstance(field.field_info, Query) and not _takes_many(field.field_info.annotation)
    )


def repeated_errors(names: frozenset[str], request: Request) -> list[dict[str, Any]]:
    """Validation errors (pydantic's shape) for each of ``names`` given more than once."""
    errors = []
    for name in sorted(names & set(request.query_params)):
        count = len(request.query_params.getlist(name))
        if count > 1:
            errors.append(
                {
                    "type": "query_repeated",
                    "loc": ("query", name),
                    "msg": f"given {count} times; this parameter takes one value",
                    "input": None,
                }
            )
    return errors


async def query_once(request: Request) -> None:
    """Refuse a request that repeats one of its route's single-valued query parameters."""
    route = request.scope.get("route")
    query = request.query_params
    if not isinstance(route, APIRoute) or len(query.multi_items()) == len(query):
        return  # no name is repeated: the usual case, with nothing more to look at
    errors = repeated_errors(single_valued(route.dependant), request)
    if errors:
        raise RequestValidationError(errors, body=None)
