"""Which route answers never depends on the order the components are listed in (issue 20):
the rubrics component's ``/{rubric_id}`` routes take only rubric ids, so the synthesis
component's ``/v1/rubrics/instances`` is reached whether it is listed before or after."""

from __future__ import annotations

import pytest
from fastapi import APIRouter, FastAPI
from fastapi.routing import APIRoute
from starlette.routing import Match

from services.app import components
from services.rubrics.router import router
from services.rubrics.synthesis.router import router as synthesis_router


def _id_routes() -> list[APIRoute]:
    routes = [r for r in router.routes if isinstance(r, APIRoute) and "{rubric_id" in r.path]
    assert len(routes) == 5, [r.path for r in router.routes]
    return routes


def test_a_rubric_id_route_does_not_take_another_components_literal_segment() -> None:
    for route in _id_routes():
        suffix = route.path_format.removeprefix("/v1/rubrics/{rubric_id}")
        for segment in ("instances", "synthesize", "score", "import"):
            assert not route.path_regex.match(f"/v1/rubrics/{segment}{suffix}"), route.path
        assert route.path_regex.match(f"/v1/rubrics/rb_0a1b@2{suffix}"), route.path
        assert route.path_regex.match(f"/v1/rubrics/rb_0a1b{suffix}"), route.path


def _first_match(routers: list[APIRouter], method: str, path: str) -> APIRouter | None:
    """The router whose route Starlette picks for ``method path`` (None: no route matches)."""
    app = FastAPI()
    for each in routers:
        app.include_router(each)
    scope = {"type": "http", "method": method, "path": path, "root_path": ""}
    for route in app.router.routes:
        match, _ = route.matches(scope)
        if match is Match.FULL:
            # FastAPI keeps an included router as one entry (its original_router).
            return getattr(route, "original_router", None)
    return None


@pytest.mark.parametrize("rubrics_first", [True, False])
def test_each_path_reaches_its_component_whichever_is_listed_first(rubrics_first: bool) -> None:
    routers = [router, synthesis_router] if rubrics_first else [synthesis_router, router]
    for method, path in [
        ("GET", "/v1/rubrics/instances"),
        ("GET", "/v1/rubrics/instances/export"),
        ("POST", "/v1/rubrics/synthesize"),
    ]:
        assert _first_match(routers, method, path) is synthesis_router, path
    for method, path in [
        ("GET", "/v1/rubrics/rb_0a1b"),
        ("GET", "/v1/rubrics/rb_0a1b@2/versions"),
        ("POST", "/v1/rubrics/score"),
    ]:
        assert _first_match(routers, method, path) is router, path


def test_the_served_app_lists_both_and_the_openapi_paths_are_unchanged() -> None:
    names = [c.name for c in components()]
    assert {"rubrics", "synthesis"} <= set(names)
    assert {r.path_format for r in _id_routes()} == {
        "/v1/rubrics/{rubric_id}",
        "/v1/rubrics/{rubric_id}/versions",
        "/v1/rubrics/{rubric_id}/diff",
        "/v1/rubrics/{rubric_id}/rollback",
    }
