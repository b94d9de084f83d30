"""``plaudit simulator calibrate`` without ``--server``: a real tiny calibration in-process,
stored where ``plaudit serve`` finds it, so ``/v1/simulator/turn`` answers with it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from services.app import create_app
from services.settings import Settings
from services.simulator.settings import SimulatorSettings
from tests.services.simulator.test_calibration_job import GOAL, SHARED, write_slice
from tests.shared_data import reason

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(SHARED is None, reason=reason("uss")),
]

ARGS = ["--data", "sgd", "--max-steps", "2", "--batch-size", "2", "--max-length", "160"]
ARGS += ["--satisfaction-turns", "60", "--eval-per-domain", "10", "--threads", "1"]
ARGS += ["--act-turns", "60", "--eval-dialogues", "0"]


async def test_an_in_process_calibration_is_stored_and_serves_turns(tmp_path: Path) -> None:
    uss = write_slice(tmp_path / "uss")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLAUDIT_")}
    env.update(
        OMP_NUM_THREADS="1",
        PLAUDIT_DATA_DIR=str(tmp_path / "data"),
        PLAUDIT_SIMULATOR_DATA_DIR=str(uss),
    )
    binary = Path(sys.executable).with_name("plaudit")
    done = subprocess.run(
        [str(binary), "simulator", "calibrate", *ARGS],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert 'stored as uss@1 (use it as "calibration": "uss@1")' in done.stdout
    settings = Settings(  # type: ignore[call-arg]
        data_dir=tmp_path / "data", simulator=SimulatorSettings(data_dir=uss), _env_file=None
    )
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://plaudit.test") as c:
            listed = (await c.get("/v1/simulator/calibrations")).json()
            assert [(i["name"], i["version"]) for i in listed["items"]] == [("uss", 1)]
            messages = [
                {"role": "user", "content": "I need a hotel."},
                {"role": "assistant", "content": "Sorry, I cannot help with that."},
            ]
            body = {"goal": GOAL, "messages": messages, "calibration": "uss@1", "seed": 1}
            turn = await c.post("/v1/simulator/turn", json={**body, "max_new_tokens": 12})
            assert turn.status_code == 200, turn.text
            body = turn.json()
            assert body["calibration"] == "uss@1" and body["satisfaction"]["source"] == "predictor"
