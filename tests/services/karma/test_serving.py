"""KARMA served: a real tiny training run as a ``karma.train`` job on a slice of the shared
reddit_karma data (the in-process job runner, SQLite, the all-in-one app), then scoring over
HTTP and through ``/v1/rewards/group``, with the stored version stamped on every score."""

from __future__ import annotations

import asyncio
import gzip
import json
import shutil
from pathlib import Path
from typing import Any

import httpx
import pytest
import torch
from fastapi import FastAPI

from plaudit_wire.karma import TrainRequest
from services.karma.model import KarmaModel, load_model
from services.karma.service import KarmaService
from services.settings import Settings
from tests.conftest import assert_envelope
from tests.services.karma.conftest import TINY, Client, needs_shared

pytestmark = [pytest.mark.slow, needs_shared]

CONTEXT = "Is it worth taking a gap year before grad school?"
REPLIES = [
    "I took one and worked in a lab; it made my application much stronger and I knew what I "
    "wanted to study.",
    "no",
]


async def wait_for(client: httpx.AsyncClient, job_id: str) -> dict[str, Any]:
    """The job once it finished (the test fails on its own if it never does)."""
    while True:
        response = await client.get(f"/v1/jobs/{job_id}")
        assert response.status_code == 200, response.text
        job: dict[str, Any] = response.json()
        if job["state"] in ("succeeded", "failed", "cancelled"):
            return job
        await asyncio.sleep(0.2)


def service_of(app: FastAPI) -> KarmaService:
    return app.state.resources.services.require(KarmaService)


@pytest.fixture(scope="module")
async def trained(as_key: Client) -> dict[str, Any]:
    """The module's one training job, started over HTTP; before it, no model serves."""
    root = as_key("root-key")
    before = await root.post("/v1/karma/score", json={"context": CONTEXT, "replies": REPLIES})
    # Nothing trains it yet: a 404 naming the trained models (none), not a 503 (issue 23).
    error = assert_envelope(before, 404, "model")
    assert "none is being trained" in error["message"] and "none yet" in error["message"]
    threads = torch.get_num_threads()
    response = await root.post("/v1/karma/train", json=TINY)
    assert response.status_code == 202, response.text
    assert response.headers["location"] == f"/v1/jobs/{response.json()['id']}"
    assert response.json()["kind"] == "karma.train"
    job = await wait_for(root, response.json()["id"])
    assert torch.get_num_threads() == threads, "the request's threads=1 was for the run only"
    return job


async def test_the_job_trains_evaluates_and_stores_a_serving_version(
    trained: dict[str, Any], karma_settings: Settings
) -> None:
    assert trained["state"] == "succeeded", trained["error"]
    progress = trained["progress"]
    assert progress["stage"] == "saving" and progress["done"] == progress["total"]
    result = trained["result"]
    assert result["model"] == {"name": "karma", "version": 1, "serving": True}
    assert (result["variant"], result["base_model"]) == ("context_only", "bundled")
    evaluation = result["evaluation"]
    assert evaluation["pairs"] == 16 and 0 <= evaluation["pair_accuracy"] <= 1
    assert evaluation["split"].endswith("reddit_karma[test]")
    assert evaluation["baselines"]["random"]["pair_accuracy"] == 0.5
    length = evaluation["baselines"]["length"]
    assert 0 <= length["pair_accuracy"] <= 1 and "mean" in length["spearman"]
    assert [b["bin"] for b in evaluation["by_ratio"]] == [b["bin"] for b in length["by_ratio"]]
    assert result["training"]["sibling_pairs"] == 24 and result["training"]["steps"] == 3
    # the run's scratch folder is gone; the model lives in the artifact store only
    assert not list((karma_settings.data_dir / "karma" / "runs").iterdir())


async def test_models_lists_versions_with_metrics_and_the_serving_one(
    trained: dict[str, Any], as_key: Client
) -> None:
    page = (await as_key("trainer-key").get("/v1/karma/models")).json()
    assert {k: page[k] for k in ("name", "serving_version", "total", "limit", "offset")} == {
        "name": "karma",
        "serving_version": 1,
        "total": 1,
        "limit": 100,
        "offset": 0,
    }
    [item] = page["items"]
    assert (item["version"], item["serving"], item["variant"]) == (1, True, "context_only")
    assert item["job_id"] == trained["id"] and item["bytes"] > 1_000_000
    metrics = item["metrics"]
    assert metrics["pair_accuracy"] == trained["result"]["evaluation"]["pair_accuracy"]
    assert metrics["baselines"]["length"]["pair_accuracy"] is not None
    assert metrics["train_pairs"] == 24
    empty = (await as_key("trainer-key").get("/v1/karma/models?name=nothing-here")).json()
    assert empty["items"] == [] and empty["serving_version"] is None and empty["total"] == 0


async def test_score_answers_the_stored_models_scores_and_its_version(
    trained: dict[str, Any], as_key: Client, karma_app: FastAPI
) -> None:
    response = await as_key("trainer-key").post(
        "/v1/karma/score", json={"context": CONTEXT, "replies": REPLIES}
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["kind"] == "rewards" and len(body["scores"]) == 2
    assert body["model"] == {"name": "karma", "version": 1, "variant": "context_only"}
    # the same numbers as the stored files, loaded here
    version = await karma_app.state.resources.artifacts.get("karma", 1)
    path = karma_app.state.resources.artifacts.payload_path(version)
    direct = KarmaModel.load(path).score(CONTEXT, REPLIES)
    assert body["scores"] == pytest.approx(direct, abs=1e-4)
    messages = [{"role": "user", "content": CONTEXT}]
    chat = await as_key("trainer-key").post(
        "/v1/karma/score", json={"context": messages, "replies": REPLIES[:1], "model": "karma@1"}
    )
    assert chat.status_code == 200 and chat.json()["model"]["version"] == 1


async def test_64_concurrent_single_reply_requests_share_forward_passes(
    trained: dict[str, Any], as_key: Client, karma_app: FastAPI
) -> None:
    client = as_key("trainer-key")
    replies = [f"Reply {i}: {REPLIES[i % 2]}" for i in range(64)]
    batched = await client.post("/v1/karma/score", json={"context": CONTEXT, "replies": replies})
    worker = service_of(karma_app).pool.worker("karma@1", Path("unused"))
    before = worker.stats.batches, worker.stats.merged
    singles = await asyncio.gather(
        *(
            client.post("/v1/karma/score", json={"context": CONTEXT, "replies": [reply]})
            for reply in replies
        )
    )
    scores = [r.json()["scores"][0] for r in singles]
    assert scores == pytest.approx(batched.json()["scores"], abs=1e-4)
    batches, merged = worker.stats.batches - before[0], worker.stats.merged - before[1]
    assert merged >= 1 and batches < 64, (batches, merged)


async def test_the_karma_channel_scores_a_group_with_its_version(
    trained: dict[str, Any], as_key: Client
) -> None:
    client = as_key("trainer-key")
    spec = {"channels": {"karma": {"weight": 1.0}, "judge_scale": {"weight": 0.5, "k": 5}}}
    body = {"prompt": CONTEXT, "completions": REPLIES, "spec": spec}
    response = await client.post("/v1/rewards/group", json=body)
    assert response.status_code == 200, response.text
    direct = await client.post("/v1/karma/score", json={"context": CONTEXT, "replies": REPLIES})
    for result, score in zip(response.json()["results"], direct.json()["scores"], strict=True):
        karma = result["channels"]["karma"]
        assert karma["status"] == "ok" and karma["value"] == pytest.approx(score, abs=1e-4)
        assert karma["meta"]["model"] == {
            "name": "karma",
            "version": 1,
            "variant": "context_only",
            "ref": "karma@1",
        }
        judged = result["channels"]["judge_scale"]["value"]
        assert result["total"] == pytest.approx(karma["value"] + 0.5 * judged)
    listed = (await client.get("/v1/rewards/channels")).json()["karma"]
    assert listed["needs_group"] is False and listed["default_range"] is None
    assert listed["options"] == ["model", "weight"]


async def test_an_unknown_model_is_a_404_and_one_in_training_a_503(
    as_key: Client, karma_app: FastAPI
) -> None:
    """Issue 23: 503 (retry) only while a model of that name is being trained."""
    client = as_key("trainer-key")
    body = {"context": CONTEXT, "replies": ["a"], "model": "untrained"}
    unknown = assert_envelope(await client.post("/v1/karma/score", json=body), 404, "model")
    assert "trained models:" in unknown["message"]
    spec = {"channels": {"karma": {"model": "untrained"}}}
    group = {"prompt": CONTEXT, "completions": REPLIES, "spec": spec}
    assert_envelope(await client.post("/v1/rewards/group", json=group), 404)
    store = karma_app.state.resources.jobs.store
    job = await store.create("karma.train", {"name": "untrained"}, owner=None)
    try:
        scored = await client.post("/v1/karma/score", json=body)
        assert "plaudit karma train" in assert_envelope(scored, 503, "model")["message"]
        grouped = await client.post("/v1/rewards/group", json=group)
        assert assert_envelope(grouped, 503)["type"] == "model_not_trained"
    finally:
        await store.request_cancel(job.id)


async def test_bad_input_is_a_clear_422(
    as_key: Client, karma_settings: Settings, trained: dict[str, Any]
) -> None:
    root, trainer = as_key("root-key"), as_key("trainer-key")

    async def refused(body: dict[str, Any], param: str | None) -> str:
        return assert_envelope(await root.post("/v1/karma/train", json=body), 422, param)["message"]

    assert "no file or folder" in await refused({"data": "no/such.jsonl"}, "data")
    assert "outside the folders" in await refused({"data": "/etc/hostname"}, "data")
    bad = karma_settings.data_dir / "bad.jsonl"
    bad.write_text('{"context": "c", "reply": "r", "score": "many", "thread_id": "t"}\n')
    assert "line 1: field 'score'" in await refused({"data": "bad.jsonl"}, "data")
    folder = karma_settings.data_dir / "half"
    folder.mkdir(exist_ok=True)
    assert "lacks threads.jsonl.gz" in await refused({"data": "half"}, "data")
    # The same answer whether the path is missing, a plain folder or too long (issue 23).
    answers = {
        await refused({"method": "finetune", "base_model": path}, "base_model")
        for path in ("/no/model", "/etc", "/" + "x" * 300)
    }
    assert len(answers) == 3 and all("not a model folder" in a for a in answers)
    await refused({"variant": "everything"}, "variant")
    await refused({"output_dir": "/tmp/x"}, "output_dir")
    await refused({"epochs": 0}, "epochs")
    # Issue 24: frozen is the default, so a fine-tuning option alone would do nothing: refused.
    assert "read only by method 'finetune'" in await refused({"epochs": 2}, "epochs")
    frozen_only = {"method": "finetune", "head_epochs": 5}
    assert "by method 'frozen'" in await refused(frozen_only, "head_epochs")
    forbidden = await trainer.post("/v1/karma/train", json=TINY)
    assert_envelope(forbidden, 403)
    for body in (
        {"context": CONTEXT, "replies": []},
        {"context": CONTEXT, "replies": ["a"], "model": "karma@x"},
        {"context": CONTEXT, "replies": ["a"], "extra": 1},
        {"context": [{"role": "bot", "content": "x"}], "replies": ["a"]},
    ):
        assert_envelope(await trainer.post("/v1/karma/score", json=body), 422)
    bad_spec = {"channels": {"karma": {"model": "karma@x"}}}
    grouped = await trainer.post(
        "/v1/rewards/group", json={"prompt": CONTEXT, "completions": REPLIES, "spec": bad_spec}
    )
    assert "bad version 'x'" in assert_envelope(grouped, 422)["message"]
    missing = {"context": CONTEXT, "replies": ["a"], "model": "karma@9"}
    assert (
        "no version 9"
        in assert_envelope(await trainer.post("/v1/karma/score", json=missing), 422, "model")[
            "message"
        ]
    )


async def test_later_versions_serve_once_promoted(
    trained: dict[str, Any], as_key: Client, karma_app: FastAPI, tmp_path: Path
) -> None:
    """Versions of another name, saved from the trained files: the first serves at once, a
    second waits for a promotion (admin only), and ``promote: true`` serves at once."""
    service, store = service_of(karma_app), karma_app.state.resources.artifacts
    stored = await store.get("karma", 1)
    files = tmp_path / "model"
    shutil.copytree(store.payload_path(stored), files)
    request = TrainRequest(name="karma-b")
    for _ in range(2):
        await service.save(files, stored.content, request, owner=None, job_id=None)
    root, trainer = as_key("root-key"), as_key("trainer-key")
    page = (await root.get("/v1/karma/models?name=karma-b")).json()
    assert [(i["version"], i["serving"]) for i in page["items"]] == [(2, False), (1, True)]
    body = {"context": CONTEXT, "replies": REPLIES, "model": "karma-b"}
    assert (await root.post("/v1/karma/score", json=body)).json()["model"]["version"] == 1
    assert_envelope(await trainer.post("/v1/karma/models/2/promote?name=karma-b"), 403)
    moved = await root.post("/v1/karma/models/2/promote?name=karma-b", json={"note": "better"})
    assert moved.json() == {
        "name": "karma-b",
        "serving_version": 2,
        "previous_version": 1,
        "moved": True,
    }
    assert (await root.post("/v1/karma/score", json=body)).json()["model"]["version"] == 2
    stale = await root.post("/v1/karma/models/1/promote?name=karma-b", json={"expected_version": 1})
    assert_envelope(stale, 409)
    assert_envelope(await root.post("/v1/karma/models/7/promote?name=karma-b"), 404)
    eager = TrainRequest(name="karma-b", promote=True)
    third = await service.save(files, stored.content, eager, owner=None, job_id=None)
    assert third.version == 3 and third.current
    assert (await root.post("/v1/karma/score", json=body)).json()["model"]["version"] == 3


async def test_data_found_unusable_in_the_job_fails_it_with_the_reason(
    as_key: Client, karma_settings: Settings, trained: dict[str, Any]
) -> None:
    """A folder with the three files passes the request's check; a pair naming a comment that
    is not there is found when the job reads it."""
    folder = karma_settings.data_dir / "broken"
    shutil.copytree(karma_settings.karma.data_dir, folder)
    with gzip.open(folder / "pairs.jsonl.gz", "at") as handle:
        handle.write(json.dumps({"split": "train", "preferred": "gone", "other": "gone2"}) + "\n")
    root = as_key("root-key")
    response = await root.post("/v1/karma/train", json={**TINY, "data": "broken", "name": "b"})
    assert response.status_code == 202, response.text
    job = await wait_for(root, response.json()["id"])
    assert job["state"] == "failed"
    assert job["error"].startswith("KarmaDataError: ") and "comment 'gone'" in job["error"]
    assert (await root.get("/v1/karma/models?name=b")).json()["total"] == 0


async def test_a_cancelled_training_stops_and_stores_nothing(
    as_key: Client, trained: dict[str, Any]
) -> None:
    root = as_key("root-key")
    body = {**TINY, "batch_size": 2, "name": "cancelled"}
    job_id = (await root.post("/v1/karma/train", json=body)).json()["id"]
    while True:
        job = (await root.get(f"/v1/jobs/{job_id}")).json()
        if job["progress"]["stage"] == "training" or job["state"] != "running":
            break
        await asyncio.sleep(0.05)
    assert (await root.post(f"/v1/jobs/{job_id}/cancel")).status_code == 200
    job = await wait_for(root, job_id)
    assert job["state"] == "cancelled" and job["progress"]["done"] < 12, job
    assert (await root.get("/v1/karma/models?name=cancelled")).json()["total"] == 0


async def test_a_with_metadata_model_reads_the_metadata_sent_over_http(
    trained: dict[str, Any], as_key: Client
) -> None:
    """A ``with_metadata`` model trained as a job scores the same replies differently when the
    request's metadata differs; the ``context_only`` model ignores metadata."""
    root = as_key("root-key")
    body = {**TINY, "variant": "with_metadata", "name": "karma-meta"}
    response = await root.post("/v1/karma/train", json=body)
    assert response.status_code == 202, response.text
    job = await wait_for(root, response.json()["id"])
    assert job["state"] == "succeeded", job["error"]
    assert job["result"]["variant"] == "with_metadata"
    near = {"subreddit": "GradSchool", "depth": 1, "age": "1h"}
    far = {"subreddit": "AskReddit", "depth": 6, "age": "30d"}
    scores: dict[tuple[str, str], list[float]] = {}
    for model in ("karma-meta", "karma@1"):
        for label, metadata in (("near", near), ("far", far)):
            answer = await as_key("trainer-key").post(
                "/v1/karma/score",
                json={"context": CONTEXT, "replies": REPLIES, "metadata": metadata, "model": model},
            )
            assert answer.status_code == 200, answer.text
            scores[model, label] = answer.json()["scores"]
            expected = "with_metadata" if model == "karma-meta" else "context_only"
            assert answer.json()["model"]["variant"] == expected
    assert scores["karma@1", "near"] == pytest.approx(scores["karma@1", "far"], abs=1e-6)
    near_scores, far_scores = scores["karma-meta", "near"], scores["karma-meta", "far"]
    moved = [abs(a - b) for a, b in zip(near_scores, far_scores, strict=True)]
    assert max(moved) > 1e-4, scores


async def test_a_frozen_encoder_model_trains_as_a_job_and_serves(
    trained: dict[str, Any], as_key: Client, karma_app: FastAPI
) -> None:
    """The frozen method (issue 24): a head over frozen MiniLM embeddings, trained on every
    training pair of the slice as a job, then scored over HTTP through its model worker."""
    root = as_key("root-key")
    body = {"data": "reddit_karma", "method": "frozen", "name": "karma-frozen", "head_epochs": 3}
    body |= {"encoder_max_length": 64, "eval_max_pairs": 16, "spearman_threads": 3, "threads": 1}
    response = await root.post("/v1/karma/train", json=body)
    assert response.status_code == 202, response.text
    job = await wait_for(root, response.json()["id"])
    assert job["state"] == "succeeded", job["error"]
    result = job["result"]
    assert result["training"]["method"] == "frozen"
    assert result["training"]["sibling_pairs"] >= 24  # every train pair of the slice
    assert "length_matched" in result["evaluation"]
    answer = await as_key("trainer-key").post(
        "/v1/karma/score", json={"context": CONTEXT, "replies": REPLIES, "model": "karma-frozen"}
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["model"] == {
        "name": "karma-frozen",
        "version": 1,
        "variant": "context_only",
    }
    version = await karma_app.state.resources.artifacts.get("karma-frozen", 1)
    path = karma_app.state.resources.artifacts.payload_path(version)
    direct = load_model(path).score(CONTEXT, REPLIES)
    assert answer.json()["scores"] == pytest.approx(direct, abs=1e-4)
    listed = (await as_key("trainer-key").get("/v1/karma/models?name=karma-frozen")).json()
    assert listed["items"][0]["metrics"]["train_pairs"] == result["training"]["sibling_pairs"]
