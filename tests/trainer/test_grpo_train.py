"""Real GRPO steps (TRL) on SmolLM2-135M-Instruct, every reward from a real Plaudit server.

Kept as cheap as two CPU cores allow: 2 optimizer steps of one group (G=4) of 8-token
completions, the default spec (MiniLM diversity + a 1..5 grade by the SmolLM2 judge).
"""

from __future__ import annotations

import math
import uuid
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from trainer import DEFAULT_SPEC, TrainConfig
from trainer.runner import TrainResult, resolve_policy_dir, train
from trainer_client import PlauditClient

pytestmark = pytest.mark.slow

STEPS = 2


def test_two_grpo_steps_change_the_policy_with_server_rewards(
    server: str, model_cache_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLAUDIT_MODEL_CACHE_DIR", str(model_cache_dir))
    config = TrainConfig(
        server_url=server,
        run_id=f"test-train-{uuid.uuid4().hex[:8]}",
        steps=STEPS,
        max_completion_length=8,
        threads=1,  # the server shares the CPU: one thread is ~6x faster than two spinning
        output_dir=tmp_path / "out",
    )
    assert config.spec == DEFAULT_SPEC
    initial = load_file(str(resolve_policy_dir(None) / "model.safetensors"))
    lines: list[str] = []

    result = train(config, emit=lines.append, keep_calls=True)

    assert result.steps == STEPS
    _assert_weights_changed(initial, result.model)
    _assert_rewards_came_from_the_server(server, result.run_id, result)
    assert result.failed == 0 and result.scored == STEPS * config.num_generations
    assert [line.split("  ")[0] for line in lines] == [f"step {i}/{STEPS}" for i in (1, 2)]
    assert all("failed 0/4" in line and "judge_scale" in line for line in lines), lines
    assert result.output_dir is not None
    assert (result.output_dir / "config.json").is_file()


def _assert_weights_changed(initial: dict[str, torch.Tensor], model: torch.nn.Module) -> None:
    trained = model.state_dict()
    changed = [k for k, v in initial.items() if not torch.equal(v, trained[k].detach().cpu())]
    # Adam moves every parameter that got a gradient; a group with distinct rewards gives one
    # to all of them.
    assert len(changed) > 0.9 * len(initial), f"{len(changed)}/{len(initial)} tensors changed"


def _assert_rewards_came_from_the_server(server: str, run_id: str, result: TrainResult) -> None:
    calls, history = result.reward.calls, result.history
    with PlauditClient(server) as client:
        stored = client.reward_runs(run_id)["items"]
    # One group per step, stored once per group (the server saw every reward request).
    assert len(calls) == STEPS and len(stored) == STEPS
    assert [g["step"] for g in stored] == list(range(1, STEPS + 1)), "the steps it printed"
    for call, group, logs in zip(calls, stored, history, strict=True):
        totals = [r["total"] for r in group["result"]["results"]]
        assert call.rewards == pytest.approx(totals)
        assert all(t is not None and math.isfinite(t) for t in totals)
        # the reward TRL optimized (and logged) is the mean of the server's totals
        assert logs["reward"] == pytest.approx(sum(totals) / len(totals), rel=1e-5)
        assert len(call.completions) == len(totals) == 4
