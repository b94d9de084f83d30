"""API keys and scopes, readiness, metrics, and the last line of defence against crashes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from services.app import create_app
from services.core.models.embedder import Embedder
from services.settings import Settings
from tests.conftest import assert_envelope

ADV = {"groups": [{"scores": [1, 2]}], "k": 2}


@pytest.fixture
def app_overrides() -> dict[str, Any]:
    return {"api_keys": {"trainer-key": ["reward"], "ops-key": ["admin"]}}


async def test_keys_and_scopes(client: httpx.AsyncClient) -> None:
    missing = await client.post("/v1/ordinal/advantages", json=ADV)
    assert assert_envelope(missing, 401)["type"] == "unauthorized"
    wrong = await client.post(
        "/v1/ordinal/advantages", json=ADV, headers={"Authorization": "Bearer nope"}
    )
    assert_envelope(wrong, 401)
    admin_only = await client.post(
        "/v1/ordinal/advantages", json=ADV, headers={"X-API-Key": "ops-key"}
    )
    assert assert_envelope(admin_only, 403)["type"] == "forbidden"
    ok = await client.post(
        "/v1/ordinal/advantages", json=ADV, headers={"Authorization": "Bearer trainer-key"}
    )
    assert ok.status_code == 200
    assert (await client.get("/health/live")).status_code == 200


async def test_ready_is_503_while_the_model_cannot_load(tmp_path: Path, judge_backend: Any) -> None:
    settings = Settings(data_dir=tmp_path, embedder_model=str(tmp_path / "no-such-model"))  # type: ignore[call-arg]
    app = create_app(settings, judge_backend=judge_backend)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            diversity = await client.post("/v1/diversity/group", json={"completions": ["a", "b"]})
            error = assert_envelope(diversity, 503)
            assert "failed to load" in error["message"]
            ready = assert_envelope(await client.get("/health/ready"), 503)
            assert "embedder (failed: " in ready["message"] and "no-such-model" in ready["message"]
            # Services that need no model keep working.
            assert (await client.post("/v1/ordinal/advantages", json=ADV)).status_code == 200


async def test_ready_and_metrics(tmp_path: Path, embedder: Embedder, judge_backend: Any) -> None:
    app = create_app(Settings(data_dir=tmp_path), embedder=embedder, judge_backend=judge_backend)  # type: ignore[call-arg]
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            ready = await client.get("/health/ready")
            assert ready.status_code == 200
            checks = {"database": True, "cache": True, "embedder": True, "judge": True}
            assert ready.json()["checks"] == checks
            await client.post("/v1/ordinal/advantages", json=ADV)
            await client.post("/v1/diversity/group", json={"completions": ["a", "b"]})
            text = (await client.get("/metrics")).text
            assert 'route="/v1/ordinal/advantages"' in text
            assert 'plaudit_model_batch_size_count{model="embedder"}' in text
            docs = await client.get("/openapi.json")
            paths = docs.json()["paths"]
            assert {"/v1/ordinal/advantages", "/v1/diversity/group"} <= set(paths)


async def test_an_unexpected_crash_is_a_500_envelope_without_traceback(
    tmp_path: Path, embedder: Embedder, judge_backend: Any
) -> None:
    app = create_app(Settings(data_dir=tmp_path), embedder=embedder, judge_backend=judge_backend)  # type: ignore[call-arg]

    async def explode() -> None:
        raise RuntimeError("secret internals")

    app.add_api_route("/boom", explode)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            response = await client.get("/boom")
            error = assert_envelope(response, 500)
            assert error["type"] == "internal_error"
            assert "secret" not in response.text


async def test_runs_belong_to_the_key_that_wrote_them(
    settings: Settings, embedder: Embedder, tmp_path: Path
) -> None:
    keys = {"key-alice-0123456789": ["reward"], "key-bob-0123456789ab": ["reward"]}
    keys["key-ops-0123456789abc"] = ["admin"]
    app = create_app(settings.with_overrides(api_keys=keys), embedder=embedder)
    alice, bob, ops = ({"Authorization": f"Bearer {k}"} for k in keys)
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://t") as client,
    ):
        for who, run in ((alice, "run-a"), (bob, "run-b")):
            body = {**ADV, "run_id": run, "step": 1}
            assert (await client.post("/v1/ordinal/advantages", json=body, headers=who)).is_success

        async def runs(who: dict[str, str]) -> list[str]:
            page = (await client.get("/v1/runs", headers=who)).json()
            return sorted(r["run_id"] for r in page["items"])

        assert await runs(alice) == ["run-a"]
        assert await runs(bob) == ["run-b"]
        assert await runs(ops) == ["run-a", "run-b"]
        stolen = await client.get("/v1/runs/run-a/groups", headers=bob)
        assert stolen.json()["items"] == [] and stolen.json()["total"] == 0
        audited = await client.get("/v1/runs/run-a/groups", headers=ops)
        assert audited.json()["total"] == 1


async def test_the_landing_page_names_the_judge_of_a_server_that_has_one(
    client: httpx.AsyncClient,
) -> None:
    page = await client.get("/")
    assert page.status_code == 200
    assert "<th>judge backend</th><td>local</td>" in page.text
    assert "SmolLM2-135M-Instruct (bundled)" in page.text
