"""Build TRL's ``GRPOTrainer`` for a :class:`TrainConfig` and run it, rewards from Plaudit.

::

    from trainer import TrainConfig
    from trainer.runner import train

    result = train(TrainConfig(steps=2))   # needs `plaudit serve` on 127.0.0.1:8000
    result.history[-1]["reward"], result.failed, result.output_dir
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from datasets import Dataset
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    PrinterCallback,
    ProgressCallback,
    TrainerCallback,
)
from trl.trainer.grpo_config import GRPOConfig
from trl.trainer.grpo_trainer import GRPOTrainer

from trainer.callbacks import StepLogCallback
from trainer.config import TrainConfig
from trainer.data import as_rows, training_prompts
from trainer.metering import MeteredReward, RewardFunc
from trainer.server import check_server, server_reward
from trainer_client.rewards import PlauditReward

log = logging.getLogger(__name__)


@dataclass
class TrainResult:
    """What a run did: its id, steps, per-step logs, failure counts and the trained policy."""

    run_id: str
    steps: int
    history: list[dict[str, Any]]
    failed: int
    scored: int
    model: Any
    reward: MeteredReward
    output_dir: Path | None
    lines: list[str] = field(default_factory=list)


def resolve_policy_dir(model: str | None) -> Path:
    """The policy's HF directory: ``model`` as given, or the bundled SmolLM2-135M-Instruct
    converted (once) into the settings' models dir (``PLAUDIT_MODEL_CACHE_DIR``)."""
    from judges.backends.convert import resolve_model_dir

    return resolve_model_dir(model, _models_dir())


def _models_dir() -> Path | None:
    try:
        from services.settings import get_settings
    except ImportError:  # no server parts installed: the converter's own default cache dir
        return None
    return get_settings().models_dir


def grpo_args(config: TrainConfig) -> GRPOConfig:
    """GRPO on a CPU: one step is ``groups_per_step`` whole groups, fp32, a log every step."""
    return GRPOConfig(
        output_dir=str(config.resolved_output_dir),
        max_steps=config.steps,
        num_generations=config.num_generations,
        per_device_train_batch_size=config.batch_size,
        gradient_accumulation_steps=1,
        max_completion_length=config.max_completion_length,
        learning_rate=config.learning_rate,
        temperature=config.temperature,
        beta=config.beta,
        seed=config.seed,
        use_cpu=not torch.cuda.is_available(),
        bf16=False,
        activation_checkpointing=False,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        disable_tqdm=True,
    )


def build_trainer(
    config: TrainConfig,
    reward: RewardFunc,
    callbacks: Sequence[TrainerCallback] = (),
) -> GRPOTrainer:
    """The GRPO trainer on the policy of ``config``, its prompts and ``reward``."""
    model_dir = resolve_policy_dir(config.model)
    tokenizer = AutoTokenizer.from_pretrained(model_dir, padding_side="left")
    chat = config.chat if config.chat is not None else bool(tokenizer.chat_template)
    policy = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    prompts = training_prompts(config.prompts, config.groups_per_step)
    dataset = Dataset.from_list(as_rows(prompts, chat=chat))
    trainer = GRPOTrainer(
        model=policy,
        reward_funcs=reward,
        args=grpo_args(config),
        train_dataset=dataset,
        processing_class=tokenizer,
        callbacks=list(callbacks),
    )
    for noisy in (ProgressCallback, PrinterCallback):  # StepLogCallback shows bar and lines
        trainer.remove_callback(noisy)
    return trainer


def train(
    config: TrainConfig,
    *,
    reward_func: RewardFunc | None = None,
    emit: Callable[[str], None] | None = None,
    keep_calls: bool = False,
    check: bool = True,
) -> TrainResult:
    """Run ``config.steps`` GRPO steps; rewards from ``config.server_url`` unless
    ``reward_func`` is given. ``check`` first asks the server whether it is ready and
    accepts the spec, so a wrong URL or spec fails before the model loads."""
    if check:
        check_server(config)
    server: PlauditReward | None = None
    if reward_func is None:
        reward_func = server = server_reward(config)
    reward = MeteredReward(reward_func, keep_calls=keep_calls)
    steps_log = StepLogCallback(emit)
    threads = torch.get_num_threads()
    try:
        trainer = build_trainer(config, reward, [steps_log])
        log.info("training run %s for %d steps", config.run_id, config.steps)
        if config.threads is not None:
            # On two cores shared with the server, the two processes' torch thread pools
            # spinning against each other made a step ~6x slower than one trainer thread.
            torch.set_num_threads(config.threads)
        with warnings.catch_warnings():
            # TRL 1.16 still calls transformers' renamed is_gradient_checkpointing (not ours).
            warnings.filterwarnings("ignore", ".*is_gradient_checkpointing", FutureWarning)
            trainer.train()
    finally:
        torch.set_num_threads(threads)
        if server is not None:
            server.close()
    output_dir = None
    if config.save_model:
        output_dir = config.resolved_output_dir / "final"
        trainer.save_model(str(output_dir))
    history = [dict(entry) for entry in trainer.state.log_history if "reward" in entry]
    return TrainResult(
        run_id=config.run_id,
        steps=trainer.state.global_step,
        history=history,
        failed=reward.failed,
        scored=reward.scored,
        model=trainer.model,
        reward=reward,
        output_dir=output_dir,
        lines=steps_log.lines,
    )
