"""Every bad input gets its status and the error envelope, naming the field."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.conftest import assert_envelope

ADV = "/v1/ordinal/advantages"
DEC = "/v1/ordinal/decompose"
DIV = "/v1/diversity/group"
DIVS = "/v1/diversity/groups"

CASES: list[tuple[str, str, Any, str | None, str | None]] = [
    # (name, path, body, param, a word the message must contain)
    (
        "non-integer without edges",
        ADV,
        {"groups": [{"scores": [1, 2.5]}], "k": 5},
        "groups[0].scores[1]",
        "bin_edges",
    ),
    ("score above K", ADV, {"groups": [{"scores": [1, 6]}], "k": 5}, "groups[0].scores[1]", "1..5"),
    ("score below 1", ADV, {"groups": [{"scores": [0, 2]}], "k": 5}, "groups[0].scores[0]", "1..5"),
    ("empty group", ADV, {"groups": [{"scores": []}], "k": 5}, "groups[0].scores", None),
    ("no groups", ADV, {"groups": [], "k": 5}, "groups", None),
    ("K too large", ADV, {"groups": [{"scores": [1]}], "k": 101}, "k", None),
    ("K too small", ADV, {"groups": [{"scores": [1]}], "k": 1}, "k", None),
    ("group K out of range", ADV, {"groups": [{"scores": [1], "k": 0}]}, "groups[0].k", None),
    ("K missing", ADV, {"groups": [{"scores": [1, 2]}]}, "k", "required"),
    (
        "unknown estimator",
        ADV,
        {"groups": [{"scores": [1]}], "k": 5, "estimator": "ppo"},
        "estimator",
        None,
    ),
    ("unknown field", ADV, {"groups": [{"scores": [1]}], "k": 5, "kk": 1}, "kk", None),
    ("too many groups", ADV, {"groups": [{"scores": [1]}] * 11, "k": 5}, "groups", "limit"),
    (
        "group too large",
        ADV,
        {"groups": [{"scores": [1] * 9}], "k": 5},
        "groups[0].scores",
        "limit",
    ),
    (
        "weights length",
        ADV,
        {"groups": [{"scores": [1, 2]}], "k": 5, "threshold_weights": [1]},
        "threshold_weights",
        None,
    ),
    (
        "weights with grpo",
        ADV,
        {"groups": [{"scores": [1, 2]}], "k": 5, "estimator": "grpo", "threshold_weights": [1] * 4},
        None,
        "odrpo",
    ),
    (
        "edges not increasing",
        ADV,
        {"groups": [{"scores": [0.3]}], "bin_edges": [0.5, 0.2]},
        "bin_edges",
        "increasing",
    ),
    (
        "edges contradict K",
        ADV,
        {"groups": [{"scores": [0.3]}], "bin_edges": [0.5], "k": 5},
        "k",
        None,
    ),
    ("negative eps", ADV, {"groups": [{"scores": [1]}], "k": 5, "eps": -1}, "eps", None),
    (
        "scores not numbers",
        ADV,
        {"groups": [{"scores": ["x"]}], "k": 5},
        "groups[0].scores[0]",
        None,
    ),
    ("decompose out of range", DEC, {"scores": [1, 9], "k": 5}, "scores[1]", None),
    ("decompose non-integer", DEC, {"scores": [1.5], "k": 5}, "scores[0]", "bin_edges"),
    ("one completion", DIV, {"completions": ["only"]}, "completions", None),
    ("too many completions", DIV, {"completions": ["x"] * 9}, "completions", "limit"),
    ("bad completion item", DIV, {"completions": ["a", {"txt": "b"}]}, "completions[1].text", None),
    ("unknown metric", DIV, {"completions": ["a", "b"], "metric": "l2"}, "metric", None),
    ("unknown scaling", DIV, {"completions": ["a", "b"], "scaling": "zscore"}, "scaling", None),
    ("negative weight", DIV, {"completions": ["a", "b"], "weight": -1}, "weight", None),
    ("text too long", DIV, {"completions": ["a", "b" * 2001]}, "completions[1].text", "limit"),
    (
        "too many groups (diversity)",
        DIVS,
        {"groups": [{"completions": ["a", "b"]}] * 5},
        "groups",
        "limit",
    ),
    (
        "group too large (batch)",
        DIVS,
        {"groups": [{"completions": ["a"] * 9}]},
        "groups[0].completions",
        "limit",
    ),
]


@pytest.fixture
def app_overrides() -> dict[str, Any]:
    return {
        "ordinal_max_groups": 10,
        "ordinal_max_group_size": 8,
        "diversity_max_completions": 8,
        "diversity_max_groups": 4,
        "diversity_max_text_chars": 2000,
    }


@pytest.mark.parametrize(
    ("name", "path", "body", "param", "word"), CASES, ids=[c[0] for c in CASES]
)
async def test_bad_input_is_a_422_envelope(
    client: httpx.AsyncClient, name: str, path: str, body: Any, param: str | None, word: str | None
) -> None:
    response = await client.post(path, json=body)
    error = assert_envelope(response, 422, param)
    assert error["type"] == "invalid_request"
    if word is not None:
        assert word in error["message"], error["message"]


async def test_malformed_json_is_a_422_envelope(client: httpx.AsyncClient) -> None:
    response = await client.post(
        ADV, content=b"{not json", headers={"content-type": "application/json"}
    )
    assert_envelope(response, 422)


async def test_unknown_route_and_method_use_the_envelope(client: httpx.AsyncClient) -> None:
    assert_envelope(await client.get("/v1/nowhere"), 404)
    assert assert_envelope(await client.get(ADV), 405)["type"] == "method_not_allowed"


async def test_caller_request_id_is_echoed(client: httpx.AsyncClient) -> None:
    response = await client.post(ADV, json={"groups": []}, headers={"X-Request-ID": "trainer-42"})
    assert response.headers["x-request-id"] == "trainer-42"
    assert response.json()["error"]["request_id"] == "trainer-42"
