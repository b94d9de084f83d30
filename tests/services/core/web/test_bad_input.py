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


# --- strict input (issue 9) -----------------------------------------------------------------

PAIR = "/v1/judge/pairwise"
RUNS = "/v1/runs"
REWARDS = "/v1/rewards/group"
DIVERSITY_SPEC = {"channels": {"diversity": {"weight": 1.0}}}

STRICT_CASES: list[tuple[str, str, Any, str | None, str | None]] = [
    (
        "boolean as a score",
        ADV,
        {"groups": [{"scores": [1, True, 5]}], "k": 5},
        "groups[0].scores[1]",
        None,
    ),
    (
        "boolean as an edge",
        ADV,
        {"groups": [{"scores": [0.3]}], "bin_edges": [False]},
        "bin_edges[0]",
        None,
    ),
    ("string as K", ADV, {"groups": [{"scores": [1]}], "k": "5"}, "k", "integer"),
    # 5.0 is an integer to JSON Schema and so to the server (issue 23, finding 10); 5.5 is not.
    ("float as K", ADV, {"groups": [{"scores": [1]}], "k": 5.5}, "k", "integer"),
    ("string as a score", DEC, {"scores": ["1"], "k": 5}, "scores[0]", None),
    (
        "string as a boolean",
        PAIR,
        {"prompt": "p", "response_a": "a", "response_b": "b", "swap": "yes"},
        "swap",
        "boolean",
    ),
    (
        "number as a boolean",
        PAIR,
        {"prompt": "p", "response_a": "a", "response_b": "b", "cache": 1},
        "cache",
        "boolean",
    ),
    (
        "step past int32",
        ADV,
        {"groups": [{"scores": [1]}], "k": 5, "run_id": "r", "step": 2**31},
        "step",
        None,
    ),
    ("empty run_id", ADV, {"groups": [{"scores": [1]}], "k": 5, "run_id": ""}, "run_id", None),
    (
        "NUL in run_id",
        ADV,
        {"groups": [{"scores": [1]}], "k": 5, "run_id": "r\x00"},
        "run_id",
        "control",
    ),
    (
        "newline in a group id",
        ADV,
        {"groups": [{"id": "g\n1", "scores": [1]}], "k": 5},
        "groups[0].id",
        "control",
    ),
    (
        "NUL in a completion id",
        DIV,
        {"completions": [{"id": "a\x00", "text": "x"}, "y"]},
        "completions[0].id",
        "control",
    ),
    (
        "duplicate completion ids",
        DIV,
        {"completions": [{"id": "a", "text": "x"}, {"id": "a", "text": "y"}]},
        "completions",
        "twice",
    ),
    (
        "an id that repeats a default id",
        DIV,
        {"completions": ["x", {"id": "c0", "text": "y"}]},
        "completions",
        "twice",
    ),
    (
        "duplicate ids in a batch group",
        DIVS,
        {"groups": [{"completions": [{"id": "a", "text": "x"}, {"id": "a", "text": "y"}]}]},
        "groups[0].completions",
        "twice",
    ),
    (
        "duplicate ids (rewards)",
        REWARDS,
        {
            "prompt": "p",
            "completions": [{"id": "a", "text": "x"}, {"id": "a", "text": "y"}],
            "spec": DIVERSITY_SPEC,
        },
        "completions",
        "twice",
    ),
    (
        "boolean as a token count",
        REWARDS,
        {
            "prompt": "p",
            "completions": ["x", "y"],
            "token_counts": [1, True],
            "spec": DIVERSITY_SPEC,
        },
        "token_counts[1]",
        None,
    ),
    (
        "long column name",
        REWARDS,
        {
            "prompt": "p",
            "completions": ["x", "y"],
            "columns": {"c" * 201: 1},
            "spec": DIVERSITY_SPEC,
        },
        None,
        None,
    ),
    (
        "chat message without content",
        PAIR,
        {"prompt": [{"role": "user"}], "response_a": "a", "response_b": "b"},
        "prompt[0].content",
        "required",
    ),
]


@pytest.mark.parametrize(
    ("name", "path", "body", "param", "word"), STRICT_CASES, ids=[c[0] for c in STRICT_CASES]
)
async def test_strict_input_is_a_422_naming_the_field(
    client: httpx.AsyncClient, name: str, path: str, body: Any, param: str | None, word: str | None
) -> None:
    error = assert_envelope(await client.post(path, json=body), 422, param)
    if word is not None:
        assert word in error["message"], error["message"]


async def test_json_integers_are_valid_floats(client: httpx.AsyncClient) -> None:
    body = {"groups": [{"scores": [1, 2]}], "k": 5, "eps": 0, "threshold_weights": [1, 1, 1, 1]}
    assert (await client.post(ADV, json=body)).status_code == 200
    assert (await client.post(DEC, json={"scores": [0, 1], "bin_edges": [0]})).status_code == 200


@pytest.mark.parametrize("token", [b"NaN", b"Infinity", b"-Infinity", b"1e999"])
async def test_nan_and_infinity_are_not_numbers(client: httpx.AsyncClient, token: bytes) -> None:
    body = b'{"groups": [{"scores": [1, ' + token + b']}], "k": 5}'
    response = await client.post(ADV, content=body, headers={"content-type": "application/json"})
    assert_envelope(response, 422, "groups[0].scores[1]")


async def test_malformed_json_says_what_and_where(client: httpx.AsyncClient) -> None:
    body = b'{"groups": [{"scores": [1, 2]}],\n "k": 5,,}'
    response = await client.post(ADV, content=body, headers={"content-type": "application/json"})
    error = assert_envelope(response, 422)
    assert error["param"] is None
    assert "not valid JSON" in error["message"] and "line 2, column 9" in error["message"], error


async def test_empty_body_says_the_body_is_missing(client: httpx.AsyncClient) -> None:
    response = await client.post(ADV, content=b"", headers={"content-type": "application/json"})
    error = assert_envelope(response, 422)
    assert "body is missing" in error["message"], error


async def test_a_body_that_is_not_an_object_says_so(client: httpx.AsyncClient) -> None:
    error = assert_envelope(await client.post(ADV, json=[1, 2]), 422)
    assert "must be a JSON object, not an array" in error["message"], error


async def test_a_body_that_is_not_json_says_so(client: httpx.AsyncClient) -> None:
    text = await client.post(ADV, content=b"k=5", headers={"content-type": "text/plain"})
    assert "not JSON" in assert_envelope(text, 422)["message"]
    binary = b'{"k": "\xff"}'
    response = await client.post(ADV, content=binary, headers={"content-type": "application/json"})
    assert "UTF-8" in assert_envelope(response, 400)["message"]


async def test_every_problem_is_listed_with_its_location(client: httpx.AsyncClient) -> None:
    body = {"groups": [{"scores": [True]}], "k": "5", "eps": -1}
    error = assert_envelope(await client.post(ADV, json=body), 422, "groups[0].scores[0]")
    for where in ("groups[0].scores[0]:", "k:", "eps:"):
        assert where in error["message"], error["message"]


@pytest.mark.parametrize(
    "query", ["offset=99999999999999999999", "offset=-1", "limit=0", "limit=abc"]
)
async def test_paging_beyond_the_database_is_a_422(client: httpx.AsyncClient, query: str) -> None:
    name = query.split("=")[0]
    assert_envelope(await client.get(f"{RUNS}?{query}"), 422, name)


async def test_control_characters_in_a_path_id_are_a_422(client: httpx.AsyncClient) -> None:
    assert_envelope(await client.get(f"{RUNS}/r%00un/groups"), 422, "run_id")
    assert_envelope(await client.get(f"{RUNS}/run/groups?step=2147483648"), 422, "step")


async def test_control_characters_in_an_idempotency_key_are_a_422(
    client: httpx.AsyncClient,
) -> None:
    body = {"groups": [{"scores": [1, 2]}], "k": 5}
    response = await client.post(ADV, json=body, headers={"Idempotency-Key": "key\tone"})
    assert_envelope(response, 422, "Idempotency-Key")


def _raw(text: str) -> bytes:
    """JSON as Python writes it for undecodable bytes: ``"\\ud800"`` escapes, lone surrogates."""
    return text.encode()


@pytest.mark.parametrize(
    ("path", "body", "param"),
    [
        (DIV, r'{"completions": ["ok", "bad \ud800 text"]}', "completions[1]"),
        (DIV, r'{"completions": ["ok", {"id": "b", "text": "\udc00"}]}', "completions[1].text"),
        (PAIR, r'{"prompt": "p\ud800", "response_a": "a", "response_b": "b"}', "prompt"),
        (REWARDS, r'{"prompt": "p", "completions": ["a", "b"], "spec": {"\ud800": 1}}', None),
    ],
)
async def test_lone_surrogates_are_a_422_naming_the_field(
    client: httpx.AsyncClient, path: str, body: str, param: str | None
) -> None:
    response = await client.post(
        path, content=_raw(body), headers={"content-type": "application/json"}
    )
    error = assert_envelope(response, 422, param)
    assert "surrogate" in error["message"], error


async def test_a_lone_surrogate_never_fails_other_requests(client: httpx.AsyncClient) -> None:
    """The bad request is refused before embedding, so the batch it would share stays valid."""
    import asyncio

    good = [
        client.post(DIV, json={"completions": [f"a cat {i}", "a dog", "stocks"]}) for i in range(8)
    ]
    bad = client.post(
        DIV,
        content=_raw(r'{"completions": ["a cat", "a \ud800 dog"]}'),
        headers={"content-type": "application/json"},
    )
    *answers, refused = await asyncio.gather(*good, bad)
    assert [a.status_code for a in answers] == [200] * 8
    assert_envelope(refused, 422, "completions[1]")
