"""``plaudit karma train`` without ``--server``: the run trains in-process (a real tiny run) and
stores the model in the set-up's own artifact store, where ``plaudit serve`` finds it serving."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from services.app import create_app
from services.karma.settings import KarmaSettings
from services.settings import Settings
from tests.services.karma.conftest import needs_shared
from tests.services.karma.slice import write_slice

pytestmark = [pytest.mark.slow, needs_shared]

TINY_ARGS = [
    "--method",
    "finetune",
    "--max-train-pairs",
    "16",
    "--max-length",
    "64",
    "--batch-size",
    "8",
]
TINY_ARGS += ["--eval-max-pairs", "8", "--spearman-threads", "2", "--threads", "1"]


def _train(root: Path, sliced: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLAUDIT_")}
    env.update(
        OMP_NUM_THREADS="1",
        PLAUDIT_DATA_DIR=str(root / "data"),
        PLAUDIT_KARMA_DATA_DIR=str(sliced),
        PLAUDIT_KARMA_MODELS_DIR=str(root / "models"),
    )
    binary = Path(sys.executable).with_name("plaudit")
    return subprocess.run(
        [str(binary), "karma", "train", *TINY_ARGS, *extra],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


async def test_in_process_training_stores_a_serving_version(tmp_path: Path) -> None:
    sliced = write_slice(tmp_path / "reddit_karma", {"train": 16, "dev": 4, "test": 8})
    first = _train(tmp_path, sliced)
    assert first.returncode == 0, first.stderr
    assert "stored as karma@1 (serving)" in first.stdout
    second = _train(tmp_path, sliced)
    assert second.returncode == 0, second.stderr
    assert "stored as karma@2 (not serving: promote it to serve)" in second.stdout
    skipped = _train(tmp_path, sliced, "--no-store")
    assert skipped.returncode == 0 and "stored as" not in skipped.stdout
    settings = Settings(  # type: ignore[call-arg]
        data_dir=tmp_path / "data",
        karma=KarmaSettings(data_dir=sliced, models_dir=tmp_path / "models"),
        _env_file=None,
    )
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://plaudit.test"
        )
        async with client:
            page = (await client.get("/v1/karma/models")).json()
            assert [(i["version"], i["serving"]) for i in page["items"]] == [
                (2, False),
                (1, True),
            ]
            scored = await client.post(
                "/v1/karma/score", json={"context": "Any advice for finals?", "replies": ["Sleep."]}
            )
            assert scored.status_code == 200, scored.text
            assert scored.json()["model"]["version"] == 1
