"""The LoRA stage of a calibration resumes from the trainer's checkpoint (a retried
``simulator.calibrate`` job after its process died, issue 23): the real SmolLM2 and TRL's
SFTTrainer, a few steps on a slice of the shared USS dialogues."""

from __future__ import annotations

from pathlib import Path

import pytest

from judges.backends.convert import resolve_model_dir
from plaudit_wire.simulator import CalibrationConfig
from services.simulator import data as uss
from services.simulator.calibration import _train_lora
from tests.services.simulator.test_calibration_job import write_slice
from tests.shared_data import reason, shared_copy

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shared_copy("uss", "sgd.jsonl.gz") is None, reason=reason("uss")),
]


class _Died(Exception):
    """Stands for the death of the process running the calibration."""


def test_an_interrupted_lora_resumes_from_its_last_checkpoint(
    tmp_path: Path, model_cache_dir: Path
) -> None:
    folder = write_slice(tmp_path / "uss", per_split=4)
    items = uss.examples(uss.in_split(uss.load(["sgd"], folder), "train"))[:8]
    config = CalibrationConfig(data=["sgd"], max_steps=3, batch_size=1, max_length=256, threads=1)
    base = resolve_model_dir(None, model_cache_dir)
    checkpoints = tmp_path / "trainer"

    def dies_at_step_2(done: int, total: int, stage: str) -> None:
        if stage == "train" and done == 2:
            raise _Died

    with pytest.raises(_Died):
        _train_lora(config, base, items, tmp_path / "first", dies_at_step_2, checkpoints, 1)
    assert sorted(p.name for p in checkpoints.glob("checkpoint-*")) == ["checkpoint-1"]
    steps: list[int] = []

    def record(done: int, total: int, stage: str) -> None:
        if stage == "train":
            steps.append(done)

    training = _train_lora(config, base, items, tmp_path / "again", record, checkpoints, 1)
    assert training["resumed_from_step"] == 1 and training["steps"] == 3
    assert steps == [2, 3]  # step 1 is not trained again
    assert (tmp_path / "again" / "adapter").is_dir()
