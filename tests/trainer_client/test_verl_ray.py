"""verl's own reward loop on a local Ray cluster (``ray.init(num_cpus=2)``) scoring a batch with
the documented reward file (``custom_reward_function.path=trainer_client/verl.py``,
``name=compute_score``) against the real ``plaudit serve all`` (issue 22):

* the ``remote`` manager hands ``compute_score`` to a Ray actor, which unpickles it in another
  process (before: ``cannot pickle '_thread.lock'``), and its rewards equal the file's called here;
* the ``rate_limited`` manager assembles a batch where a row has no prompt (before: that row's
  dict had no ``score`` and verl's assembly failed with ``KeyError: 'score'``).

verl 0.9.1 and Ray live in a virtualenv of their own (``scripts/install_verl.sh``, run by
``make install``), since verl pins a transformers older than ours; the batch runs there, in
``verl_driver.py``. Without that virtualenv the tests skip and say how to make it.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import trainer_client.verl
from tests.trainer_client.conftest import LiveServer

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
VERL_PYTHON = Path(
    os.environ.get(
        "PLAUDIT_TEST_VERL_PYTHON", Path.home() / ".cache" / "plaudit-verl-venv" / "bin" / "python"
    )
)
SPEC = {"channels": {"judge_scale": {"k": 5}}}
QUESTION = "What is the capital of France?"
ROWS: list[dict[str, Any]] = [
    {"response": "The capital of France is Paris.", "extra_info": {"question": QUESTION}},
    {"response": "I do not know.", "extra_info": {"question": QUESTION}},
    {"response": "Paris.", "extra_info": {"question": QUESTION}},
]


@pytest.fixture
def run_verl(live_all_server: LiveServer, model_cache_dir: Path) -> Callable[..., dict[str, Any]]:
    if not VERL_PYTHON.exists():
        pytest.skip(f"no verl virtualenv at {VERL_PYTHON}: run scripts/install_verl.sh")
    from judges.backends.convert import resolve_model_dir

    tokenizer = str(resolve_model_dir(None, model_cache_dir))

    def run(manager: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
        job = {
            "manager": manager,
            "tokenizer": tokenizer,
            "reward_file": trainer_client.verl.__file__,
            "rows": rows,
            "env": {
                "PLAUDIT_URL": live_all_server.url,
                "PLAUDIT_API_KEY": live_all_server.reward_key,
                "PLAUDIT_REWARD_SPEC": json.dumps(SPEC),
                "PYTHONPATH": str(REPO),
            },
        }
        env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
        done = subprocess.run(
            [str(VERL_PYTHON), str(Path(__file__).with_name("verl_driver.py"))],
            input=json.dumps(job).encode(),
            capture_output=True,
            env=env,
            cwd=REPO,
            check=False,
        )
        assert done.returncode == 0, done.stderr.decode()[-4000:]
        result: dict[str, Any] = json.loads(done.stdout.decode().strip().splitlines()[-1])
        return result

    return run


def _here(live_all_server: LiveServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLAUDIT_URL", live_all_server.url)
    monkeypatch.setenv("PLAUDIT_API_KEY", live_all_server.reward_key)
    monkeypatch.setenv("PLAUDIT_REWARD_SPEC", json.dumps(SPEC))
    trainer_client.verl.reset()


def test_the_remote_manager_scores_on_ray_actors_with_the_documented_file(
    run_verl: Callable[..., dict[str, Any]],
    live_all_server: LiveServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    result = run_verl("remote", ROWS)
    assert "error" not in result, result
    _here(live_all_server, monkeypatch)
    expected = [
        trainer_client.verl.compute_score("plaudit", row["response"], None, row["extra_info"])
        for row in ROWS
    ]
    trainer_client.verl.reset()
    assert result["scores"] == pytest.approx([e["score"] for e in expected], abs=1e-4)
    assert result["extra"]["plaudit_failed"] == [0.0] * len(ROWS)
    assert result["extra"]["judge_scale"] == pytest.approx(result["scores"], abs=1e-4)
    assert all(1.0 <= s <= 5.0 for s in result["scores"])


def test_the_rate_limited_manager_assembles_a_batch_with_a_row_without_a_prompt(
    run_verl: Callable[..., dict[str, Any]],
) -> None:
    rows = [*ROWS[:2], {"response": "Paris.", "extra_info": {"split": "train"}}]
    result = run_verl("rate_limited", rows)
    assert "error" not in result, result  # before: KeyError: 'score'
    assert set(result["extra"]) == {"score", "judge_scale", "plaudit_failed"}
    assert result["extra"]["plaudit_failed"] == [0.0, 0.0, 1.0], "the row is flagged"
    assert result["scores"][2] == 3.0, "the middle of judge_scale's 1..5, never a silent 0"
