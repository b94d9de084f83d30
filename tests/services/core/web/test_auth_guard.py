"""Keys are checked before the body is read; short keys and open servers stay on loopback;
``/metrics`` can require a key (issue 9)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from services.core.errors import InvalidInput
from services.core.models.embedder import Embedder
from services.core.reliability_settings import SecuritySettings
from services.settings import Settings
from tests import conftest as shared
from tests.conftest import assert_envelope
from tests.services.judge.scripted import ScriptedBackend

LONG_KEY = "trainer-key-0123456789abcdef"
SHORT_KEY = "k1"
KEYS = {LONG_KEY: ["reward"], SHORT_KEY: ["reward"], "ops-key-0123456789abcdef": ["admin"]}
ADV = {"groups": [{"scores": [1, 2]}], "k": 2}


class Body:
    """A JSON body streamed in 1 MiB chunks, counting how many the server pulled."""

    def __init__(self, mib: int) -> None:
        self.mib, self.pulled = mib, 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for _ in range(self.mib):
            self.pulled += 1
            yield b" " * (1024 * 1024)


def _client(app: FastAPI, remote: str = "127.0.0.1") -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, client=(remote, 40000))
    return httpx.AsyncClient(transport=transport, base_url="http://plaudit.test")


@pytest.fixture
def overrides() -> dict[str, Any]:
    return {"api_keys": KEYS, "security": SecuritySettings(metrics_scope="admin")}


async def test_a_bad_key_gets_401_before_a_31_mb_body_is_read(fast_app: FastAPI) -> None:
    body = Body(31)
    headers = {"Authorization": "Bearer wrong", "Content-Length": str(31 * 1024 * 1024)}
    async with _client(fast_app) as client:
        response = await client.post("/v1/ordinal/advantages", content=body, headers=headers)
    assert assert_envelope(response, 401)["type"] == "unauthorized"
    assert body.pulled <= 1


async def test_a_good_key_with_a_31_mb_body_gets_413_unread(fast_app: FastAPI) -> None:
    body = Body(31)
    headers = {"Authorization": f"Bearer {LONG_KEY}", "Content-Length": str(31 * 1024 * 1024)}
    async with _client(fast_app) as client:
        response = await client.post("/v1/ordinal/advantages", content=body, headers=headers)
    assert_envelope(response, 413)
    assert body.pulled <= 1


async def test_a_missing_scope_is_403_before_the_body_is_read(fast_app: FastAPI) -> None:
    body = Body(2)
    headers = {"X-API-Key": "ops-key-0123456789abcdef"}
    async with _client(fast_app) as client:
        response = await client.post("/v1/ordinal/advantages", content=body, headers=headers)
    assert assert_envelope(response, 403)["type"] == "forbidden"
    assert body.pulled <= 1


async def test_short_keys_work_from_loopback_only(fast_app: FastAPI) -> None:
    headers = {"Authorization": f"Bearer {SHORT_KEY}"}
    async with _client(fast_app) as local:
        assert (await local.post("/v1/ordinal/advantages", json=ADV, headers=headers)).is_success
    async with _client(fast_app, remote="192.0.2.7") as remote:
        refused = await remote.post("/v1/ordinal/advantages", json=ADV, headers=headers)
        assert "loopback" in assert_envelope(refused, 401)["message"]
        good = {"Authorization": f"Bearer {LONG_KEY}"}
        assert (await remote.post("/v1/ordinal/advantages", json=ADV, headers=good)).is_success


async def test_metrics_can_require_a_key(fast_app: FastAPI) -> None:
    async with _client(fast_app) as client:
        assert_envelope(await client.get("/metrics"), 401)
        reward = await client.get("/metrics", headers={"Authorization": f"Bearer {LONG_KEY}"})
        assert_envelope(reward, 403)
        admin = await client.get("/metrics", headers={"X-API-Key": "ops-key-0123456789abcdef"})
        assert admin.status_code == 200 and "plaudit_request_latency_seconds" in admin.text
        assert (await client.get("/health/live")).status_code == 200


@pytest.mark.parametrize(
    ("scope", "anonymous", "reward", "admin"),
    [(None, 401, 403, 200), ("open", 200, 200, 200), ("reward", 401, 200, 403)],
)
async def test_metrics_need_an_admin_key_by_default_when_keys_are_set(
    embedded_settings: Settings,
    embedder: Embedder,
    scope: Any,
    anonymous: int,
    reward: int,
    admin: int,
) -> None:
    """Issue 23: /metrics listed every tenant's run ids to anyone."""
    settings = embedded_settings.model_copy(
        update={"api_keys": KEYS, "security": SecuritySettings(metrics_scope=scope)}
    )
    app = shared.create_app(settings, embedder=embedder, judge_backend=ScriptedBackend())
    async with app.router.lifespan_context(app), _client(app) as client:
        assert (await client.get("/metrics")).status_code == anonymous
        as_reward = await client.get("/metrics", headers={"Authorization": f"Bearer {LONG_KEY}"})
        assert as_reward.status_code == reward
        as_admin = await client.get("/metrics", headers={"X-API-Key": "ops-key-0123456789abcdef"})
        assert as_admin.status_code == admin


async def _start(settings: Settings, embedder: Embedder) -> None:
    app = shared.create_app(settings, embedder=embedder, judge_backend=ScriptedBackend())
    async with app.router.lifespan_context(app):
        pass


async def test_the_app_itself_refuses_an_open_non_loopback_host(
    embedded_settings: Settings, embedder: Embedder
) -> None:
    """Covers ``uvicorn services...:create_app --factory``, which skips the plaudit command."""
    with pytest.raises(InvalidInput, match="without API keys"):
        await _start(embedded_settings.model_copy(update={"host": "0.0.0.0"}), embedder)
    short = embedded_settings.model_copy(update={"host": "0.0.0.0", "api_keys": KEYS})
    with pytest.raises(InvalidInput, match="shorter than 16"):
        await _start(short, embedder)


async def test_short_keys_draw_a_warning_at_start(
    embedded_settings: Settings, embedder: Embedder, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="services.core.web.auth"):
        await _start(embedded_settings.model_copy(update={"api_keys": KEYS}), embedder)
    assert "1 API key(s) are shorter than 16" in caplog.text
    assert SHORT_KEY not in caplog.text.replace("16 characters", "")


async def test_an_open_server_answers_loopback_callers_only(
    embedded_settings: Settings, embedder: Embedder
) -> None:
    app = shared.create_app(embedded_settings, embedder=embedder, judge_backend=ScriptedBackend())
    async with app.router.lifespan_context(app):
        async with _client(app) as local:
            assert (await local.post("/v1/ordinal/advantages", json=ADV)).status_code == 200
        async with _client(app, remote="192.0.2.7") as remote:
            refused = await remote.post("/v1/ordinal/advantages", json=ADV)
            assert "loopback" in assert_envelope(refused, 403)["message"]


async def test_the_admin_page_cannot_be_framed_or_run_foreign_script(
    embedded_settings: Settings, embedder: Embedder
) -> None:
    """Issue 23: /admin sent no Content-Security-Policy or X-Frame-Options."""
    app = shared.create_app(embedded_settings, embedder=embedder, judge_backend=ScriptedBackend())
    async with app.router.lifespan_context(app), _client(app) as client:
        for path in ("/admin", "/admin/static/admin.js", "/admin/static/admin.css"):
            response = await client.get(path)
            assert response.status_code == 200, path
            policy = response.headers["content-security-policy"]
            assert "frame-ancestors 'none'" in policy and "script-src 'self'" in policy
            assert "unsafe-inline" not in policy
            assert response.headers["x-frame-options"] == "DENY"
            assert response.headers["x-content-type-options"] == "nosniff"
