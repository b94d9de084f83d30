"""The one paging dependency: every listing takes ``limit`` (1 to 1000, default 100) and
``offset`` (default 0) and answers :class:`~plaudit_wire.schemas.Page`::

    @router.get("")
    async def things(service: Service, page: Paging) -> Page[Thing]:
        return await service.page(limit=page.limit, offset=page.offset)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Query

from plaudit_wire.schemas import INT32_MAX

MAX_LIMIT = 1000
DEFAULT_LIMIT = 100


@dataclass(frozen=True)
class PageParams:
    """Which page a listing asked for."""

    limit: int
    offset: int


async def page_params(
    limit: Annotated[
        int, Query(ge=1, le=MAX_LIMIT, description="items per page (at most 1000)")
    ] = DEFAULT_LIMIT,
    offset: Annotated[int, Query(ge=0, le=INT32_MAX, description="items to skip")] = 0,
) -> PageParams:
    return PageParams(limit=limit, offset=offset)


Paging = Annotated[PageParams, Depends(page_params)]
