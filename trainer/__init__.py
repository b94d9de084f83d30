"""``plaudit train``: a thin GRPO trainer (TRL) whose rewards come from a Plaudit server.

The policy samples G completions per prompt, a Plaudit server scores each group over HTTP
(``trainer_client.rewards.plaudit_reward_func``), and TRL's ``GRPOTrainer`` turns the rewards
into group-relative advantages and an optimizer step. Small CPU defaults: SmolLM2-135M-Instruct
(the bundled judge model, as the policy), G=4, 16-token completions::

    from trainer import TrainConfig
    from trainer.runner import train

    result = train(TrainConfig(server_url="http://127.0.0.1:8000", steps=2))
    print(result.run_id, result.history[-1]["reward"])

This package needs the ``train`` extra (torch, transformers, trl, datasets); importing it, the
config and the data helpers does not import torch, only :mod:`trainer.runner` does.
"""

from trainer.config import DEFAULT_SPEC, TrainConfig
from trainer.data import DEFAULT_PROMPTS, load_prompts

__all__ = ["DEFAULT_PROMPTS", "DEFAULT_SPEC", "TrainConfig", "load_prompts"]
