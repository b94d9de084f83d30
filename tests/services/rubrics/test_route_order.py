"""Which route answers never depends on the order the components are listed in (issue 20):
the rubrics component's ``/{rubric_id}`` routes take only rubric ids, so the synthesis
component's ``/v1/rubrics/instances`` is reached whether it is listed before or after."""

from __future__ import annotations

from fastapi.routing import APIRoute

from services.app import components
from services.rubrics.router import router


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


def test_rubrics_are_listed_before_synthesis_and_the_openapi_paths_are_unchanged() -> None:
    names = [c.name for c in components()]
    assert names.index("rubrics") < names.index("synthesis")
    assert {r.path_format for r in _id_routes()} == {
        "/v1/rubrics/{rubric_id}",
        "/v1/rubrics/{rubric_id}/versions",
        "/v1/rubrics/{rubric_id}/diff",
        "/v1/rubrics/{rubric_id}/rollback",
    }
