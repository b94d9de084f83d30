"""A dataset's ``rubric_id`` column flows from a TRL reward call through ``plaudit_reward_func``
to the ``rubric`` channel of a real ``plaudit serve all`` (SQLite, SmolLM2 judge) over TCP,
and so do OpenRLHF labels with ``PLAUDIT_LABEL_COLUMN``; pass rates reach the trainer logs."""

from __future__ import annotations

import math
import uuid
from types import SimpleNamespace

import httpx
import pytest

import trainer_client.openrlhf
from tests.trainer_client.conftest import LiveServer
from tests.trainer_client.test_rewards_adapters import Recorder
from trainer_client import plaudit_reward_func
from trainer_client._scorer import ClientConfig, GroupScorer

pytestmark = pytest.mark.slow

QUESTION = "Why does water boil sooner on a mountain?"
SPEC = {"channels": {"rubric": {}}}


def _rubric(server: LiveServer, name: str, criterion: str) -> str:
    body = {"name": name, "criteria": [{"text": criterion, "weight": 2}]}
    response = httpx.post(
        f"{server.url}/v1/rubrics",
        json=body,
        headers={"Authorization": f"Bearer {server.reward_key}"},
        timeout=30,
    )
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def _stored_rubrics(server: LiveServer, run_id: str) -> list[tuple[str, str]]:
    """(rubric id, first completion) of each group the run stored, in scoring order."""
    response = httpx.get(
        f"{server.url}/v1/runs/{run_id}/groups",
        headers={"Authorization": f"Bearer {server.reward_key}"},
        timeout=30,
    )
    out = []
    for group in response.json()["items"]:
        first = group["result"]["results"][0]
        out.append((first["channels"]["rubric"]["meta"]["rubric"]["id"], first["id"]))
    return out


def test_trl_rubric_id_column_picks_each_rows_rubric(live_all_server: LiveServer) -> None:
    pressure = _rubric(live_all_server, "pressure", "Says that the air pressure is lower")
    colder = _rubric(live_all_server, "colder", "Says that the water is colder")
    run_id = f"rubric-columns-{uuid.uuid4().hex[:8]}"
    reward = plaudit_reward_func(
        live_all_server.url, SPEC, api_key=live_all_server.reward_key, run_id=run_id
    )
    recorder = Recorder()
    prompts = [QUESTION] * 4
    completions = ["Lower air pressure.", "It is cold.", "Pressure drops.", "Colder air."]
    rewards = reward(
        prompts=prompts,
        completions=completions,
        rubric_id=[pressure, pressure, f"{colder}@1", f"{colder}@1"],
        trainer_state=SimpleNamespace(global_step=2),
        log_metric=recorder.log_metric,
        log_extra=recorder.log_extra,
    )
    assert len(rewards) == 4
    assert all(r is not None and math.isfinite(r) and 0.0 <= r <= 1.0 for r in rewards)
    # one prompt, two rubrics: two groups, each scored with its rows' rubric
    assert sorted(_stored_rubrics(live_all_server, run_id)) == sorted(
        [(pressure, "c0"), (colder, "c0")]
    )
    assert recorder.extra["plaudit/rubric"] == pytest.approx(rewards)
    [rate] = recorder.metrics["plaudit/rubric/pass_rate/required"]
    assert 0.0 < rate < 1.0
    assert not any("pass_rate/c1" in name for name in recorder.metrics), "per-row rubrics"
    reward.close()  # type: ignore[union-attr]


def test_openrlhf_labels_as_the_rubric_column(
    live_all_server: LiveServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    torch = pytest.importorskip("torch")
    pressure = _rubric(live_all_server, "pressure-2", "Says that the air pressure is lower")
    colder = _rubric(live_all_server, "colder-2", "Says that the water is colder")
    run_id = f"rubric-labels-{uuid.uuid4().hex[:8]}"
    spec = {"channels": {"rubric": {"rubric_id": colder}}}  # the labels win over it
    monkeypatch.setenv("PLAUDIT_LABEL_COLUMN", "rubric_id")
    trainer_client.openrlhf.configure(
        GroupScorer(ClientConfig(live_all_server.url, live_all_server.reward_key), spec),
        run_id=run_id,
    )
    try:
        prompts = [QUESTION] * 2
        queries = [QUESTION + " Lower air pressure.", QUESTION + " It is cold."]
        out = trainer_client.openrlhf.reward_func(queries, prompts, [pressure, pressure])
    finally:
        trainer_client.openrlhf.reset()
    logs = out["extra_logs"]
    assert isinstance(out["rewards"], torch.Tensor) and out["rewards"].shape == (2,)
    assert set(logs) == {"plaudit/rubric", "plaudit/rubric/pass_rate/required"}
    rate = logs["plaudit/rubric/pass_rate/required"]
    assert rate.shape == (2,) and float(rate[0]) == float(rate[1]), "one group, one rate"
    assert _stored_rubrics(live_all_server, run_id) == [(pressure, "c0")]
