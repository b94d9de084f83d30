"""The trainer client against the real Plaudit server (``plaudit serve ordinal`` over TCP)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid

import httpx
import pytest

from tests.trainer_client.conftest import LiveServer
from trainer_client import (
    AsyncPlauditClient,
    AuthenticationError,
    Conflict,
    InvalidRequest,
    NotFound,
    PermissionDenied,
    PlauditClient,
    RetryPolicy,
)

pytestmark = pytest.mark.slow

README_SCORES = [1, 3, 5, 5]
README_ADVANTAGES = [-5.464, -0.845, 3.155, 3.155]


def test_importing_the_client_stays_light() -> None:
    code = (
        "import json, sys, trainer_client\n"
        "heavy = {'torch', 'fastapi', 'numpy', 'services', 'starlette', 'sqlalchemy'}\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in heavy)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert json.loads(out.stdout) == []


def _client(server: LiveServer, **kwargs: object) -> PlauditClient:
    return PlauditClient(server.url, api_key=server.reward_key, **kwargs)  # type: ignore[arg-type]


def test_health_ready_and_advantages(live_server: LiveServer) -> None:
    with _client(live_server) as client:
        assert client.health() == {"status": "ok"}
        assert client.ready()["status"] == "ready"
        out = client.ordinal_advantages([{"id": "g1", "scores": README_SCORES}], k=5)
        assert client.last_request_id is not None
        assert client.last_request_id.startswith("req_")
    assert out["kind"] == "advantages"
    assert out["estimator"] == "odrpo"
    group = out["groups"][0]
    assert group["id"] == "g1"
    assert [round(a, 3) for a in group["advantages"]] == README_ADVANTAGES
    assert group["levels"] == README_SCORES


def test_decompose_and_plain_score_lists(live_server: LiveServer) -> None:
    with _client(live_server) as client:
        ladder = client.ordinal_decompose([1, 3, 5], k=5)
        grpo = client.ordinal_advantages([[1, 2], [3, 3]], k=3, estimator="grpo")
    assert ladder["indicators"] == [[0, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 1]]
    assert [g["id"] for g in grpo["groups"]] == ["g0", "g1"]
    assert grpo["groups"][1]["advantages"] == [0.0, 0.0]  # equal scores carry no signal


async def test_async_client(live_server: LiveServer) -> None:
    groups = [[1, 2, 3], [3, 2, 1], [2, 2, 2]]
    async with AsyncPlauditClient(live_server.url, api_key=live_server.reward_key) as client:
        assert (await client.health()) == {"status": "ok"}
        outs = await asyncio.gather(*(client.ordinal_advantages([g], k=3) for g in groups))
        ladder = await client.request(
            "POST", "/v1/ordinal/decompose", json={"scores": [1, 2], "k": 2}
        )
        with pytest.raises(InvalidRequest) as caught:
            await client.ordinal_advantages([[0, 1]], k=3)
    first = outs[0]["groups"][0]["advantages"]
    second = outs[1]["groups"][0]["advantages"]
    assert first == list(reversed(second))  # the same scores, in reverse order
    assert outs[2]["groups"][0]["advantages"] == [0.0, 0.0, 0.0]
    assert ladder["indicators"] == [[0], [1]]
    assert caught.value.param == "groups[0].scores[0]"


def test_invalid_request_keeps_the_envelope(live_server: LiveServer) -> None:
    with _client(live_server) as client:
        with pytest.raises(InvalidRequest) as caught:
            client.ordinal_advantages([[1, 9]], k=5)
        exc = caught.value
        assert exc.status_code == 422
        assert exc.error_type == "invalid_request"
        assert exc.param == "groups[0].scores[1]"
        assert "outside 1..5" in exc.message
        assert exc.request_id is not None
        assert exc.request_id.startswith("req_")
        assert exc.request_id == client.last_request_id
        assert exc.request_id in str(exc)
        # A typo in an option fails loudly: the server forbids unknown fields.
        with pytest.raises(InvalidRequest) as typo:
            client.ordinal_advantages([[1, 2]], k=5, estimater="grpo")
        assert typo.value.param == "estimater"


class LoseFirstAnswer(httpx.BaseTransport):
    """Delivers the first request to the server, then drops its answer (a read timeout)."""

    def __init__(self) -> None:
        self._inner = httpx.HTTPTransport()
        self.keys: list[str | None] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.keys.append(request.headers.get("Idempotency-Key"))
        response = self._inner.handle_request(request)
        if len(self.keys) == 1:
            response.read()
            response.close()
            raise httpx.ReadTimeout("simulated: the answer was lost", request=request)
        return response

    def close(self) -> None:
        self._inner.close()


def test_retry_after_a_lost_answer_is_replayed_not_rescored(live_server: LiveServer) -> None:
    run_id = f"run-{uuid.uuid4().hex}"
    transport = LoseFirstAnswer()
    sleeps: list[float] = []
    with _client(live_server, transport=transport, sleep=sleeps.append) as client:
        out = client.ordinal_advantages([[1, 2, 3]], k=3, run_id=run_id, step=0)
        page = client.run_groups(run_id)
    assert len(sleeps) == 1
    first_key, second_key, audit_key = transport.keys
    assert audit_key is None  # a GET carries no Idempotency-Key
    assert first_key is not None
    assert first_key == second_key
    assert len(page["items"]) == 1  # the server scored and stored it on the first attempt
    stored = page["items"][0]
    assert stored["result"]["advantages"] == out["groups"][0]["advantages"]
    assert page["total"] == 1


def test_same_key_replays_and_a_new_key_rescores(live_server: LiveServer) -> None:
    run_id = f"run-{uuid.uuid4().hex}"
    key = f"key-{uuid.uuid4().hex}"
    with _client(live_server) as client:
        first = client.ordinal_advantages([[1, 3]], k=3, run_id=run_id, idempotency_key=key)
        again = client.ordinal_advantages([[1, 3]], k=3, run_id=run_id, idempotency_key=key)
        assert again == first
        assert len(client.run_groups(run_id)["items"]) == 1
        client.ordinal_advantages([[1, 3]], k=3, run_id=run_id)  # a fresh key per call
        assert len(client.run_groups(run_id)["items"]) == 2
        with pytest.raises(Conflict) as caught:
            client.ordinal_advantages([[3, 1]], k=3, run_id=run_id, idempotency_key=key)
    assert caught.value.param == "Idempotency-Key"


async def test_async_same_key_replays(live_server: LiveServer) -> None:
    run_id = f"run-{uuid.uuid4().hex}"
    async with AsyncPlauditClient(live_server.url, api_key=live_server.reward_key) as client:
        answers = [
            await client.ordinal_advantages([[2, 1]], k=2, run_id=run_id, idempotency_key="k1")
            for _ in range(2)
        ]
        page = await client.run_groups(run_id)
    assert answers[0] == answers[1]
    assert len(page["items"]) == 1


def test_run_groups_filters_and_pages(live_server: LiveServer) -> None:
    run_id = f"run #{uuid.uuid4().hex}?"  # characters that must be quoted in the path
    with _client(live_server) as client:
        for step, scores in enumerate([[1, 2], [2, 1], [1, 1]]):
            client.ordinal_advantages(
                [{"id": f"s{step}", "scores": scores}], k=2, run_id=run_id, step=min(step, 1)
            )
        step_one = client.run_groups(run_id, step=1)
        first_page = client.run_groups(run_id, limit=2)
        last_page = client.run_groups(run_id, limit=2, offset=2)
    assert [g["group_id"] for g in step_one["items"]] == ["s1", "s2"]
    assert [g["group_id"] for g in first_page["items"]] == ["s0", "s1"]
    assert first_page["total"] == 3
    assert [g["group_id"] for g in last_page["items"]] == ["s2"]
    assert all(g["run_id"] == run_id for g in step_one["items"])


def test_auth_errors(live_server: LiveServer) -> None:
    no_retry = RetryPolicy(max_retries=0)
    with PlauditClient(live_server.url, retry=no_retry) as anonymous:
        assert anonymous.health() == {"status": "ok"}  # health needs no key
        with pytest.raises(AuthenticationError) as missing:
            anonymous.ordinal_decompose([1, 2], k=2)
    admin = PlauditClient(live_server.url, api_key=live_server.admin_only_key)
    with admin, pytest.raises(PermissionDenied) as denied:
        admin.ordinal_decompose([1, 2], k=2)
    assert missing.value.status_code == 401
    assert missing.value.request_id is not None
    assert denied.value.error_type == "forbidden"


def test_generic_request_and_not_found(live_server: LiveServer) -> None:
    with _client(live_server) as client:
        ladder = client.request("POST", "/v1/ordinal/decompose", json={"scores": [2], "k": 2})
        with pytest.raises(NotFound) as caught:
            client.request("GET", "/v1/no/such/route")
    assert ladder["levels"] == [2]
    assert caught.value.error_type == "not_found"
