"""HTTP routes of the rubrics service: thin handlers over RubricsService.

Writes and scoring need the ``reward`` scope; reads take ``reward`` or ``admin``. A key sees
the rubrics it wrote (an admin key sees all).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import JSONResponse
from starlette.convertors import Convertor, register_url_convertor

from plaudit_wire.names import NO_NUL_PATTERN
from plaudit_wire.rubrics import (
    ImportResult,
    RollbackRequest,
    RubricCreate,
    RubricDiff,
    RubricOut,
    RubricUpdate,
    RubricVersionInfo,
    ScoreRequest,
    ScoreResponse,
)
from plaudit_wire.schemas import Page
from services.core.settings import Scope
from services.core.web.auth import require_scope
from services.core.web.deps import IdempotencyKey, PathId, ResourcesDep, replayable, service_of
from services.core.web.paging import Paging
from services.rubrics.repository import ListFilter
from services.rubrics.service import RubricsService


class RubricIdConvertor(Convertor[str]):
    """A rubric id in a path, ``rb_...`` (``rb_...@N`` pinned): only such a segment reaches
    the ``/{rubric_id}`` routes, so ``/v1/rubrics/instances`` (synthesis) and the other literal
    routes under ``/v1/rubrics`` match whatever order the components are listed in (issue 20).
    Another segment is a 404; the parameter's own pattern still answers a malformed one."""

    regex = "rb_[^/]+"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


# Starlette keeps convertors in one table of its own, read when a route is declared: so this is
# registered when the module is imported, before the routes below.
register_url_convertor("rubric_id", RubricIdConvertor())

router = APIRouter(prefix="/v1/rubrics", tags=["rubrics"])

Write = [Depends(require_scope(Scope.reward))]
Read = [Depends(require_scope(Scope.reward, Scope.admin))]
Version = Annotated[int, Query(ge=1, le=2**31 - 1)]


async def _service(request: Request) -> RubricsService:
    return service_of(request, RubricsService)


Service = Annotated[RubricsService, Depends(_service)]


@router.post("", status_code=201, response_model=RubricOut, dependencies=Write)
async def create(
    body: RubricCreate, service: Service, resources: ResourcesDep, key: IdempotencyKey = None
) -> JSONResponse:
    """A new rubric (``rb_...``, version 1); its criteria get stable ids c1, c2, ...

    A retry with the same Idempotency-Key gets the rubric the first request created (issue 23).
    """
    created = await replayable(resources, key, "rubrics.create", body, lambda: service.create(body))
    created.status_code = 201
    return created


@router.get("", dependencies=Read)
async def listing(
    page: Paging,
    service: Service,
    name: Annotated[str | None, Query(max_length=200, pattern=NO_NUL_PATTERN)] = None,
    domain: Annotated[str | None, Query(max_length=100, pattern=NO_NUL_PATTERN)] = None,
    source: Annotated[str | None, Query(max_length=200, pattern=NO_NUL_PATTERN)] = None,
) -> Page[RubricOut]:
    """The caller's rubrics (current versions), filtered by exact name, domain or source."""
    where = ListFilter(name=name, domain=domain, source=source)
    return await service.page(where, limit=page.limit, offset=page.offset)


@router.post("/import", status_code=201, dependencies=Write)
async def import_jsonl(request: Request, service: Service) -> ImportResult:
    """A JSONL body, one rubric per line (the shape of ``POST /v1/rubrics``): all or none."""
    text = (await request.body()).decode("utf-8", errors="replace")
    return await service.import_jsonl(text)


@router.post("/score", response_model=ScoreResponse, dependencies=Write)
async def score(
    body: ScoreRequest, service: Service, resources: ResourcesDep, key: IdempotencyKey = None
) -> JSONResponse:
    """Rewards of G completions against a rubric, with every criterion's verdict."""
    return await replayable(resources, key, "rubrics.score", body, lambda: service.score(body))


#: ``rb_...`` or ``rb_...@N`` in the path. The schema states the rule (a schema-valid request
#: with a malformed version was refused: issue 23's positive check); the service checks it
#: with its own message, as for artifact names (services.core.web.deps.PathName).
PathRubricRef = Annotated[
    str,
    Path(
        min_length=1,
        max_length=200,
        json_schema_extra={"pattern": r"^rb_[^\x00-\x1f\x7f@/]+(@[1-9][0-9]*)?$"},
    ),
]


@router.get("/{rubric_id:rubric_id}", dependencies=Read)
async def get(
    rubric_id: PathRubricRef, service: Service, version: Version | None = None
) -> RubricOut:
    """The current version, or ``?version=N`` (``rb_...@N`` works too)."""
    return await service.get(rubric_id, version)


@router.put("/{rubric_id:rubric_id}", dependencies=Write)
async def update(rubric_id: PathId, body: RubricUpdate, service: Service) -> RubricOut:
    """A new version (made current); send criterion ids to keep a reworded criterion's id."""
    return await service.update(rubric_id, body)


@router.get("/{rubric_id:rubric_id}/versions", dependencies=Read)
async def versions(rubric_id: PathId, service: Service, page: Paging) -> Page[RubricVersionInfo]:
    """Every version, oldest first, with the one that is current."""
    return await service.versions(rubric_id, limit=page.limit, offset=page.offset)


@router.get("/{rubric_id:rubric_id}/diff", dependencies=Read, response_model_by_alias=True)
async def diff(
    rubric_id: PathId,
    service: Service,
    old: Annotated[int, Query(alias="from", ge=1, le=2**31 - 1)],
    new: Annotated[int, Query(alias="to", ge=1, le=2**31 - 1)],
) -> RubricDiff:
    """What changed between two versions, criterion by criterion (by id)."""
    return await service.diff(rubric_id, old, new)


@router.post("/{rubric_id:rubric_id}/rollback", dependencies=Write)
async def rollback(rubric_id: PathId, body: RollbackRequest, service: Service) -> RubricOut:
    """Make an older version current again (later versions are kept)."""
    return await service.rollback(
        rubric_id, body.to, expected_version=body.expected_version, note=body.note
    )
