"""A request that runs past its deadline is stopped and answered 504 (issue 9)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from services.core.reliability_settings import LimitsSettings
from tests.conftest import assert_envelope
from tests.services.judge.scripted import ScriptedBackend


@pytest.fixture
def overrides() -> dict[str, Any]:
    # Short against the scripted judge's 30 s, but long enough that the test's own quick
    # requests (a Postgres read on a loaded CI machine) never meet it.
    return {"limits": LimitsSettings(request_timeout_s=3.0)}


async def test_a_slow_request_gets_504_and_releases_its_key(
    fast_client: httpx.AsyncClient, scripted: ScriptedBackend
) -> None:
    body = {"prompt": "p", "completions": ["a", "b"], "run_id": "slow"}
    headers = {"Idempotency-Key": "slow-1"}
    scripted.delay = 30
    slow = await fast_client.post("/v1/judge/scale", json=body, headers=headers)
    error = assert_envelope(slow, 504)
    assert (
        error["type"] == "deadline_exceeded"
        and "PLAUDIT_LIMITS_REQUEST_TIMEOUT_S" in (error["message"])
    )
    scripted.delay = 0
    retried = await fast_client.post("/v1/judge/scale", json=body, headers=headers)
    assert retried.status_code == 200, "the stopped request released its Idempotency-Key"
    listed = await fast_client.get("/v1/runs/slow/groups")
    assert listed.status_code == 200, listed.text
    assert len(listed.json()["items"]) == 1
