"""verl's ``remote`` reward manager hands ``compute_score`` to Ray actors, and Ray pickles it
with cloudpickle. verl loads the function from a file path under a module name that is not in
``sys.modules`` (``verl.utils.import_utils.load_module``), so cloudpickle pickles it by value,
with the module globals it reads (issue 22: ``cannot pickle '_thread.lock'``). The scorer is
created lazily in each process instead. Ray itself is not installed here (nor in CI); this
checks the pickling Ray does, with the cloudpickle Ray vendors."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from types import ModuleType

import pytest

import trainer_client.openrlhf
import trainer_client.verl

cloudpickle = pytest.importorskip("cloudpickle", reason="cloudpickle (Ray's pickler) is needed")


def _load_as_verl_does(module: ModuleType) -> ModuleType:
    """``load_module(path)`` of verl 0.9.1: a unique spec name, not added to sys.modules."""
    path = os.path.abspath(module.__file__ or "")
    spec = importlib.util.spec_from_file_location(f"custom_module_{hash(path)}", path)
    assert spec is not None and spec.loader is not None
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded


@pytest.mark.parametrize(
    ("module", "name"),
    [
        (trainer_client.verl, "compute_score"),
        (trainer_client.verl, "compute_score_batch"),
        (trainer_client.openrlhf, "reward_func"),
    ],
)
def test_a_file_loaded_reward_function_pickles_by_value_and_runs_elsewhere(
    module: ModuleType, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLAUDIT_REWARD_SPEC", '{"channels": {"judge_scale": {"k": 5}}}')
    function = getattr(_load_as_verl_does(module), name)
    blob = cloudpickle.dumps(function)  # what Ray does with the manager's compute_score
    # A fresh interpreter (a Ray worker) loads it, and its scorer is made there, on first use.
    check = (
        "import sys, cloudpickle, trainer_client._scorer as s\n"
        "fn = cloudpickle.loads(sys.stdin.buffer.read())\n"
        "assert not s._ENV_SCORERS, 'nothing built at load'\n"
        "scorer = fn.__globals__['env_scorer'](fn.__globals__['_ADAPTER'])\n"
        "assert scorer is s.env_scorer(fn.__globals__['_ADAPTER'])\n"
        "print(fn.__name__)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-c", check], input=blob, capture_output=True, env=env, check=False
    )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().strip() == name


def test_the_scorer_is_one_per_process_and_adapter() -> None:
    from trainer_client._scorer import env_scorer

    assert env_scorer("verl") is env_scorer("verl")
    assert env_scorer("verl") is not env_scorer("openrlhf")
