"""slime's ``/slime/reward`` (scripted judge, real MiniLM, both set-ups), plus the protocols'
server settings and API keys (embedded set-up).

slime's ``remote_rm`` posts ``{"prompt", "response", "label"}`` per sample and reads the
answer's ``--reward-key``; the scripted judge grades "GOOD" 4, anything else 2.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import httpx
import pytest

from services.app import create_app
from services.core.errors import InvalidInput
from services.core.models.embedder import Embedder
from services.core.settings import Scope
from services.settings import Settings
from tests.conftest import assert_envelope
from tests.services.judge.scripted import ScriptedBackend

PROMPT = "Name a colour."
SPEC = json.dumps({"channels": {"judge_scale": {"k": 5}, "diversity": {"weight": 0.5}}})

AppClient = Callable[..., AbstractAsyncContextManager[httpx.AsyncClient]]


async def _reward(client: httpx.AsyncClient, body: dict[str, Any], **params: Any) -> dict[str, Any]:
    response = await client.post("/slime/reward", json=body, params=params)
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()
    return data


async def test_one_sample_gets_a_dict_for_the_reward_key(
    rewards_client: httpx.AsyncClient,
) -> None:
    body = {"prompt": PROMPT, "response": "GOOD red", "label": "red", "metadata": {"a": 1}}
    data = await _reward(rewards_client, body)
    assert set(data) == {
        "reward",
        "score",
        "total",
        "status",
        "failed",
        "channels",
        "group_size",
        "spec_hash",
    }
    assert data["reward"] == data["total"] == pytest.approx(data["channels"]["judge_scale"])
    assert data["reward"] > 3.5 and data["status"] == "ok" and data["failed"] is False
    assert data["score"] == pytest.approx((data["reward"] - 1) / 9)


async def test_chat_prompts_are_judged_as_conversations(
    rewards_client: httpx.AsyncClient,
) -> None:
    prompt = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": PROMPT, "name": "u1"},
    ]
    data = await _reward(rewards_client, {"prompt": prompt, "response": "GOOD red", "label": None})
    assert data["status"] == "ok" and data["reward"] > 3.5


async def test_a_group_is_gathered_across_requests_and_stored(
    rewards_client: httpx.AsyncClient,
) -> None:
    responses = ["GOOD red", "blue", "GOOD green", "FAIL the sky"]
    params: dict[str, str | int] = {"spec": SPEC, "group_size": 4, "run_id": "slime-run", "step": 0}
    answers = await asyncio.gather(
        *(_reward(rewards_client, {"prompt": PROMPT, "response": r}, **params) for r in responses)
    )
    assert [a["group_size"] for a in answers] == [4] * 4
    assert [a["failed"] for a in answers] == [False, False, False, True]
    failed = answers[3]
    assert failed["total"] is None and failed["status"] == "error"
    assert failed["reward"] == pytest.approx(sum(a["reward"] for a in answers[:3]) / 3)
    page = (await rewards_client.get("/v1/rewards/runs/slime-run/groups")).json()
    [stored] = page["groups"]
    assert len(stored["result"]["results"]) == 4 and stored["step"] == 0
    assert stored["result"]["spec_hash"] == answers[0]["spec_hash"]


async def test_the_error_policy_is_a_503_slime_retries(
    rewards_client: httpx.AsyncClient,
) -> None:
    params: dict[str, str | int] = {"spec": SPEC, "group_size": 2, "on_failure": "error"}
    ok, failed = await asyncio.gather(
        rewards_client.post(
            "/slime/reward", json={"prompt": PROMPT, "response": "blue"}, params=params
        ),
        rewards_client.post(
            "/slime/reward", json={"prompt": PROMPT, "response": "FAIL"}, params=params
        ),
    )
    assert ok.status_code == 200 and ok.json()["failed"] is False
    assert_envelope(failed, 503)
    assert failed.headers["retry-after"] == "5"


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"prompt": PROMPT}, "response"),
        ({"prompt": [{"role": "robot", "content": "x"}], "response": "r"}, None),
        ({"prompt": 3, "response": "r"}, None),
        # strict like every request (issue 9): no booleans or numbers as text
        ({"prompt": PROMPT, "response": True}, "response"),
        ({"prompt": [{"role": "user", "content": 5}], "response": "r"}, "prompt[0].content"),
    ],
)
async def test_bad_bodies_are_422(
    rewards_client: httpx.AsyncClient, body: dict[str, Any], param: str | None
) -> None:
    assert_envelope(await rewards_client.post("/slime/reward", json=body), 422, param)


@pytest.fixture
def app_client(embedded_settings: Settings, embedder: Embedder) -> AppClient:
    """An in-process client of an app built on the embedded settings with these changes."""

    @asynccontextmanager
    async def make(**overrides: Any) -> AsyncIterator[httpx.AsyncClient]:
        settings = embedded_settings.with_overrides(**overrides)
        app = create_app(settings, embedder=embedder, judge_backend=ScriptedBackend())
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
                yield client

    return make


async def test_server_settings_give_the_defaults(app_client: AppClient) -> None:
    spec: dict[str, Any] = {"channels": {"diversity": {}}}
    async with app_client(
        protocols_spec=spec, protocols_group_size=3, protocols_group_wait_s=0.3
    ) as client:
        answers = await asyncio.gather(
            *(_reward(client, {"prompt": PROMPT, "response": r}) for r in ["a", "bb", "a dog"])
        )
        assert [a["group_size"] for a in answers] == [3, 3, 3]
        assert sorted(a["reward"] for a in answers)[::2] == [0.0, 1.0]
        late = await _reward(client, {"prompt": PROMPT, "response": "alone"})
        assert late["status"] == "group_too_small" and late["failed"] is True


async def test_a_bad_server_spec_stops_the_start(
    embedded_settings: Settings, embedder: Embedder
) -> None:
    settings = embedded_settings.with_overrides(protocols_spec={"channels": {"nope": {}}})
    app = create_app(settings, embedder=embedder, judge_backend=ScriptedBackend())
    with pytest.raises(InvalidInput, match="nope"):
        async with app.router.lifespan_context(app):
            pass


def _basic(user: str, password: str) -> dict[str, str]:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


async def test_keys_in_the_url_credentials_are_accepted(app_client: AppClient) -> None:
    keys = {"trainer-key": [Scope.reward], "admin-key": [Scope.admin]}
    body = {"prompt": PROMPT, "response": "GOOD"}
    async with app_client(api_keys=keys) as client:
        assert_envelope(await client.post("/slime/reward", json=body), 401)
        for headers in (
            _basic("plaudit", "trainer-key"),  # http://plaudit:trainer-key@host/...
            _basic("trainer-key", ""),  # http://trainer-key@host/...
            {"Authorization": "Bearer trainer-key"},
        ):
            response = await client.post("/slime/reward", json=body, headers=headers)
            assert response.status_code == 200, response.text
        orl = {"query": ["Q A"], "prompts": ["Q"], "labels": None}
        response = await client.post("/get_reward", json=orl, headers=_basic("u", "trainer-key"))
        assert response.status_code == 200, response.text
        assert_envelope(
            await client.post("/slime/reward", json=body, headers=_basic("u", "wrong")), 401
        )
        assert_envelope(
            await client.post("/slime/reward", json=body, headers=_basic("u", "admin-key")), 403
        )
        bad = {"Authorization": "Basic %%%"}
        assert_envelope(await client.post("/slime/reward", json=body, headers=bad), 401)


async def test_a_straggler_is_scored_by_its_own_channels_with_its_groups_diversity(
    rewards_client: httpx.AsyncClient,
) -> None:
    """Issue 10: a sample arriving after its group was scored is not a midpoint guess: its
    per-sample channel (judge_scale) scores it, and diversity takes its group's mean, so
    diversity adds nothing to its advantage under group normalization."""
    params = {"spec": SPEC, "group_size": 3, "wait_s": 30}
    group = await asyncio.gather(
        *(
            _reward(rewards_client, {"prompt": PROMPT, "response": r}, **params)
            for r in ["GOOD red", "blue", "a dog"]
        )
    )
    mean_diversity = sum(a["channels"]["diversity"] for a in group) / 3
    late = await _reward(
        rewards_client, {"prompt": PROMPT, "response": "GOOD green"}, **{**params, "wait_s": 0.2}
    )
    assert late["status"] == "group_too_small" and late["failed"] is False
    assert late["channels"]["diversity"] == pytest.approx(mean_diversity)
    assert late["channels"]["judge_scale"] > 3.5, "graded on its own by the judge"
    assert late["total"] == pytest.approx(late["channels"]["judge_scale"] + 0.5 * mean_diversity)
    alone = await _reward(
        rewards_client,
        {"prompt": "A prompt sampled once.", "response": "blue"},
        **{**params, "wait_s": 0.2},
    )
    assert alone["status"] == "group_too_small" and alone["failed"] is False
    assert alone["channels"]["diversity"] == 0.5, "no group seen: the midpoint"
    assert alone["channels"]["judge_scale"] < 3.5


async def test_a_lone_surrogate_in_the_spec_query_is_a_422(
    rewards_client: httpx.AsyncClient,
) -> None:
    spec = '{"channels": {"judge_scale": {"weight": 1, "criteria": "\\ud800"}}}'
    body = {"prompt": PROMPT, "response": "r"}
    response = await rewards_client.post("/slime/reward", json=body, params={"spec": spec})
    assert "surrogate" in assert_envelope(response, 422, "spec")["message"]
