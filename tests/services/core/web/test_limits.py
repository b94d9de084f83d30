"""Every request's cost is bounded: body size, text length, token budget (issue 9).

The limits come from settings (``PLAUDIT_LIMITS_*``), are checked before the work starts, and
the OpenAPI schema states the values in force.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from services.core.reliability_settings import LimitsSettings
from services.ordinal import estimators
from tests.conftest import assert_envelope
from tests.services.judge.scripted import ScriptedBackend

LIMITS = LimitsSettings(
    max_body_bytes=64 * 1024, max_text_chars=500, max_new_tokens=64, offload_min_values=10
)
LONG = "x" * 501


@pytest.fixture
def overrides() -> dict[str, Any]:
    return {"limits": LIMITS}


class Body:
    """A request body streamed in chunks, counting how many the server pulled."""

    def __init__(self, chunk: bytes, chunks: int) -> None:
        self.chunk, self.chunks, self.pulled = chunk, chunks, 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for _ in range(self.chunks):
            self.pulled += 1
            yield self.chunk


async def test_a_body_over_the_limit_is_refused_before_it_is_read(
    fast_client: httpx.AsyncClient,
) -> None:
    body = Body(b" " * 1024, 100)
    headers = {"Content-Length": str(100 * 1024), "Content-Type": "application/json"}
    response = await fast_client.post("/v1/ordinal/advantages", content=body, headers=headers)
    assert assert_envelope(response, 413)["type"] == "payload_too_large"
    assert body.pulled <= 1, "the body must not be read"


async def test_a_streamed_body_is_cut_off_at_the_limit(fast_client: httpx.AsyncClient) -> None:
    body = Body(b" " * 1024, 1000)  # chunked: no Content-Length
    response = await fast_client.post(
        "/v1/ordinal/advantages", content=body, headers={"Content-Type": "application/json"}
    )
    assert assert_envelope(response, 413)["type"] == "payload_too_large"
    assert body.pulled < 100


TEXT_FIELDS = [
    ("/v1/judge/scale", {"prompt": LONG, "completions": ["a"]}, "prompt"),
    ("/v1/judge/scale", {"prompt": "p", "completions": ["a", LONG]}, "completions[1]"),
    (
        "/v1/judge/pairwise",
        {"prompt": [{"role": "user", "content": LONG}], "response_a": "a", "response_b": "b"},
        "prompt",
    ),
    ("/v1/judge/pairwise", {"prompt": "p", "response_a": "a", "response_b": LONG}, "response_b"),
    (
        "/v1/judge/group",
        {"prompt": "p", "completions": [{"id": "x", "text": LONG}, "b"]},
        "completions[0].text",
    ),
    (
        "/v1/rewards/group",
        {"prompt": LONG, "completions": ["a", "b"], "spec": {"channels": {"judge_scale": {}}}},
        "prompt",
    ),
    ("/v1/diversity/group", {"completions": ["a", LONG]}, "completions[1]"),
]


@pytest.mark.parametrize(("path", "body", "param"), TEXT_FIELDS)
async def test_every_text_is_limited(
    fast_client: httpx.AsyncClient,
    scripted: ScriptedBackend,
    path: str,
    body: dict[str, Any],
    param: str,
) -> None:
    response = await fast_client.post(path, json=body)
    error = assert_envelope(response, 422)
    assert error["param"] is not None and error["param"].startswith(param), error
    assert "500" in error["message"] and "PLAUDIT_LIMITS_MAX_TEXT_CHARS" in error["message"]
    assert scripted.calls == [], "nothing may reach the judge"


async def test_a_text_at_the_limit_is_accepted(fast_client: httpx.AsyncClient) -> None:
    body = {"prompt": "x" * 500, "completions": ["a"]}
    assert (await fast_client.post("/v1/judge/scale", json=body)).status_code == 200


async def test_max_new_tokens_is_capped(fast_client: httpx.AsyncClient) -> None:
    body = {"prompt": "p", "response_a": "a", "response_b": "b", "mode": "generate"}
    over = await fast_client.post("/v1/judge/pairwise", json={**body, "max_new_tokens": 65})
    assert_envelope(over, 422, "max_new_tokens")
    at = await fast_client.post("/v1/judge/pairwise", json={**body, "max_new_tokens": 64})
    assert at.status_code == 200, at.text


async def test_the_schema_states_the_limits_in_force(fast_client: httpx.AsyncClient) -> None:
    schemas = (await fast_client.get("/openapi.json")).json()["components"]["schemas"]
    assert schemas["CompletionItem"]["properties"]["text"]["maxLength"] == 500
    assert schemas["Message"]["properties"]["content"]["maxLength"] == 500
    assert schemas["PairwiseRequest"]["properties"]["response_a"]["maxLength"] == 500
    assert schemas["PairwiseRequest"]["properties"]["max_new_tokens"]["maximum"] == 64


async def test_large_ordinal_requests_are_computed_off_the_event_loop(
    fast_client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads: list[str] = []
    original = estimators.odrpo_advantages

    def recording(*args: Any, **kwargs: Any) -> Any:
        threads.append(threading.current_thread().name)
        return original(*args, **kwargs)

    monkeypatch.setattr(estimators, "odrpo_advantages", recording)
    small = {"groups": [{"scores": [1, 2, 3]}], "k": 5}
    large = {"groups": [{"scores": [1, 2, 3, 4, 5]}] * 2, "k": 5}
    for body in (small, large):
        assert (await fast_client.post("/v1/ordinal/advantages", json=body)).status_code == 200
    loop_thread = threading.current_thread().name
    assert threads[0] == loop_thread and threads[1] != loop_thread
