"""A real (tiny) calibration as a ``simulator.calibrate`` job on a slice of the shared USS
dialogues (SQLite, the in-process job runner, the all-in-one app with the real SmolLM2 and
MiniLM): LoRA through TRL's SFTTrainer, the satisfaction predictor, realism before and after;
then calibrated turns, the listing, and whole episodes against a real OpenAI-compatible
policy server."""

from __future__ import annotations

import asyncio
import gzip
import itertools
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from services.app import create_app
from services.core.models.embedder import Embedder
from services.settings import Settings
from tests.conftest import assert_envelope
from tests.services.simulator.policy_server import policy_app, serving
from tests.shared_data import reason, shared_copy

SHARED = shared_copy("uss", "sgd.jsonl.gz")
pytestmark = [pytest.mark.slow, pytest.mark.skipif(SHARED is None, reason=reason("uss"))]
KEYS = {"trainer-key": ["reward"], "root-key": ["reward", "admin"]}
TINY = {
    "data": ["sgd", "ccpe"],
    "max_steps": 2,
    "batch_size": 2,
    "max_length": 160,
    "satisfaction_turns": 60,
    "act_turns": 60,
    "eval_per_domain": 10,
    "eval_dialogues": 2,
    "dialogue_max_turns": 2,
    "max_new_tokens": 12,
    "threads": 1,
}
GOAL = "You want a cheap hotel in the north of town for two nights."


def write_slice(out: Path, per_split: int = 12) -> Path:
    """The first dialogues of each split of sgd and ccpe, written like the shared files."""
    assert SHARED is not None
    out.mkdir(parents=True)
    for name in ("sgd", "ccpe"):
        kept: list[str] = []
        seen: dict[str, int] = {}
        with gzip.open(SHARED / f"{name}.jsonl.gz", "rt", encoding="utf-8") as handle:
            for line in handle:
                split = json.loads(line)["split"]
                if seen.get(split, 0) < per_split:
                    seen[split] = seen.get(split, 0) + 1
                    kept.append(line)
        with gzip.open(out / f"{name}.jsonl.gz", "wt", encoding="utf-8") as handle:
            handle.writelines(kept)
    return out


@pytest.fixture(scope="module")
def sim_settings(tmp_path_factory: pytest.TempPathFactory, model_cache_dir: Path) -> Settings:
    root = tmp_path_factory.mktemp("simulator")
    return Settings(  # type: ignore[call-arg]
        data_dir=root / "data",
        model_cache_dir=model_cache_dir,
        api_keys=KEYS,
        simulator_data_dir=write_slice(root / "uss"),
        _env_file=None,
    )


@pytest.fixture(scope="module")
async def sim_app(
    sim_settings: Settings, embedder: Embedder, judge_backend: Any
) -> AsyncIterator[FastAPI]:
    application = create_app(sim_settings, embedder=embedder, judge_backend=judge_backend)
    async with application.router.lifespan_context(application):
        yield application


@pytest.fixture(scope="module")
async def root(sim_app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=sim_app),
        base_url="http://plaudit.test",
        headers={"Authorization": "Bearer root-key"},
        timeout=600,
    ) as client:
        yield client


@pytest.fixture(scope="module")
def policy_url(judge_backend: Any) -> Iterator[str]:
    model_dir = judge_backend.model_dir
    with serving(policy_app(model_dir)) as url:
        yield url


async def wait_for(client: httpx.AsyncClient, job_id: str) -> dict[str, Any]:
    while True:
        response = await client.get(f"/v1/jobs/{job_id}")
        assert response.status_code == 200, response.text
        job: dict[str, Any] = response.json()
        if job["state"] in ("succeeded", "failed", "cancelled"):
            return job
        await asyncio.sleep(0.5)


@pytest.fixture(scope="module")
async def calibrated(root: httpx.AsyncClient) -> dict[str, Any]:
    response = await root.post("/v1/simulator/calibrations", json=TINY)
    assert response.status_code == 202, response.text
    assert response.json()["kind"] == "simulator.calibrate"
    return await wait_for(root, response.json()["id"])


async def test_the_job_calibrates_measures_and_stores_a_version(
    calibrated: dict[str, Any],
) -> None:
    assert calibrated["state"] == "succeeded", calibrated["error"]
    result = calibrated["result"]
    assert result["calibration"] == {"name": "uss", "version": 1, "ref": "uss@1"}
    assert result["training"]["steps"] == 2 and result["training"]["peak_rss_mb"] > 0
    realism = result["realism"]
    assert realism["split"] == "test" and realism["contexts"] == 20
    for run in ("before", "after"):
        assert set(realism[run]["domains"]) == {"sgd", "ccpe"}
        for group in [*realism[run]["domains"].values(), realism[run]["all"]]:
            assert group["length_w1"] >= 0
            assert 0 <= group["question_rate"]["simulated"] <= 1
            assert group["classifier_accuracy"] is None or 0 <= group["classifier_accuracy"] <= 1
            assert 0 <= group["end"]["agreement"] <= 1
            satisfaction = group["satisfaction"]
            assert satisfaction["majority_level"] in range(1, 6)
    assert realism["after"]["all"]["classifier_accuracy"] is not None
    assert realism["after"]["all"]["satisfaction"]["macro_f1"] is not None
    for run in ("dialogues_before", "dialogues_after"):  # 2 held-out dialogues a domain
        whole = realism[run]
        assert set(whole["domains"]) == {"sgd", "ccpe"} and whole["max_turns"] == 2
        assert whole["all"]["real"]["dialogues"] == whole["all"]["simulated"]["dialogues"] == 4
        assert 1 <= whole["all"]["simulated"]["mean_user_turns"] <= 2


async def test_a_calibrated_turn_uses_the_adapter_and_the_predictor(
    calibrated: dict[str, Any], root: httpx.AsyncClient
) -> None:
    messages = [
        {"role": "user", "content": "I need a hotel."},
        {"role": "assistant", "content": "Sorry, I cannot help with that."},
    ]
    body = {"goal": GOAL, "messages": messages, "calibration": "uss@1", "seed": 1}
    response = await root.post("/v1/simulator/turn", json=body)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["calibration"] == "uss@1"
    assert answer["satisfaction"]["source"] == "predictor"
    # the act model decides the end: reported as the end marker, never a closing phrase
    assert answer["done_reason"] == ("end_marker" if answer["done"] else None)
    assert sum(answer["satisfaction"]["distribution"]) == pytest.approx(1, abs=1e-3)
    latest = await root.post("/v1/simulator/turn", json={**body, "calibration": "uss"})
    assert latest.json()["calibration"] == "uss@1", "a bare name means its current version"


async def test_the_listing_shows_calibrations_newest_first(
    calibrated: dict[str, Any], root: httpx.AsyncClient
) -> None:
    response = await root.get("/v1/simulator/calibrations")
    assert response.status_code == 200, response.text
    page = response.json()
    assert page["total"] == 1 and page["items"][0]["ref"] == "uss@1"
    metrics = page["items"][0]["metrics"]
    assert set(metrics["after"]) == {"sgd", "ccpe", "all"} and metrics["before"] is not None


async def test_an_episode_against_a_real_policy_server(
    calibrated: dict[str, Any], root: httpx.AsyncClient, policy_url: str
) -> None:
    body = {
        "goal": GOAL,
        "policy": {"base_url": f"{policy_url}/v1", "model": "smollm2", "max_tokens": 24},
        "max_turns": 2,
        "calibration": "uss@1",
        "max_new_tokens": 16,
        "seed": 5,
    }
    response = await root.post("/v1/simulator/episodes", json=body)
    assert response.status_code == 200, response.text
    episode = response.json()
    assert episode["termination"] in ("user_done", "max_turns") and episode["error"] is None
    ended = episode["termination"] == "user_done"
    assert episode["done_reason"] == ("end_marker" if ended else None)
    assert 1 <= len(episode["turns"]) <= 2
    assert episode["turns"][0]["satisfaction"] is None  # nothing to rate at the opening
    roles = [m["role"] for m in episode["messages"]]
    assert roles[0] == "user" and all(a != b for a, b in itertools.pairwise(roles))
    if episode["termination"] == "max_turns":
        assert episode["turns"][-1]["assistant"] is not None
        assert episode["final_satisfaction"]["source"] == "predictor"
        assert episode["turns"][1]["satisfaction"]["source"] == "predictor"


async def test_a_failing_policy_ends_the_episode_with_its_reason(
    root: httpx.AsyncClient, policy_url: str
) -> None:
    body = {
        "goal": GOAL,
        "policy": {"base_url": f"{policy_url}/broken/v1", "model": "x"},
        "max_turns": 3,
        "max_new_tokens": 12,
        "temperature": 0,
    }
    response = await root.post("/v1/simulator/episodes", json=body)
    assert response.status_code == 200, response.text
    episode = response.json()
    if episode["termination"] != "user_done":  # the user may say goodbye at once
        assert episode["termination"] == "policy_error" and "HTTP 500" in episode["error"]
        assert len(episode["turns"]) == 1 and episode["turns"][0]["assistant"] is None


async def test_calibration_requests_are_checked_at_once(
    root: httpx.AsyncClient, sim_app: FastAPI
) -> None:
    response = await root.post("/v1/simulator/calibrations", json={"data": ["/etc/passwd"]})
    assert_envelope(response, 422, "data")
    response = await root.post("/v1/simulator/calibrations", json={"data": []})
    assert_envelope(response, 422)
    trainer = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=sim_app),
        base_url="http://plaudit.test",
        headers={"Authorization": "Bearer trainer-key"},
    )
    async with trainer:
        response = await trainer.post("/v1/simulator/calibrations", json=TINY)
        assert response.status_code == 403
