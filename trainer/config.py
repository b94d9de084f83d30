"""What one ``plaudit train`` run does: the policy, the prompts, GRPO's knobs and the server.

Defaults are sized for a CPU laptop and ``make serve`` on the same machine::

    TrainConfig()                            # SmolLM2-135M-Instruct, built-in prompts, 10 steps
    TrainConfig(steps=2, num_generations=8, spec={"channels": {"diversity": {}}})
"""

from __future__ import annotations

import copy
import os
import secrets
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator


def default_train_root() -> Path:
    """Where ``plaudit train`` writes by default: PLAUDIT_DATA_DIR/train, else the per-user data
    folder's train/."""
    configured = os.environ.get("PLAUDIT_DATA_DIR")
    if configured:
        return Path(configured) / "train"
    import platformdirs

    return Path(platformdirs.user_data_dir("plaudit", appauthor=False)) / "train"


#: The default reward: group diversity (MiniLM embeddings, cheap) plus a pointwise 1..5 grade
#: from the server's judge (one logprob forward pass per completion). Rewards, not advantages:
#: GRPO normalizes each group itself, so the server must not normalize a second time.
DEFAULT_SPEC: dict[str, Any] = {
    "channels": {
        "diversity": {"weight": 1.0},
        "judge_scale": {"weight": 1.0, "k": 5},
    },
    "advantage": "none",
}

DEFAULT_SERVER_URL = "http://127.0.0.1:8000"


def new_run_id() -> str:
    """A fresh run id, e.g. ``train-20250101-120000-3f9a1c``."""
    return f"train-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"


class TrainConfig(BaseModel):
    """Every knob of one training run; unknown fields are refused (a typo fails loudly).

    ``model``: a HF directory or a ``.gguf`` file; None is the bundled SmolLM2-135M-Instruct,
    converted once into the settings' models dir. ``prompts``: a JSONL file of
    ``{"prompt": ...}`` objects or a text file with one prompt per line; None uses
    :data:`trainer.data.DEFAULT_PROMPTS`. One optimizer step scores ``groups_per_step``
    groups of ``num_generations`` completions each.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    server_url: str = DEFAULT_SERVER_URL
    api_key: str | None = None
    spec: dict[str, Any] = Field(default_factory=lambda: copy.deepcopy(DEFAULT_SPEC))
    run_id: str = Field(default_factory=new_run_id, min_length=1, max_length=200)
    model: str | None = None
    prompts: Path | None = None
    output_dir: Path | None = Field(
        default=None,
        description="checkpoints and the final model (default: the user data folder's "
        "train/RUN, e.g. ~/.local/share/plaudit/train/RUN, never inside a checkout)",
    )
    steps: int = Field(default=10, ge=1)
    num_generations: int = Field(default=4, ge=2)
    groups_per_step: int = Field(default=1, ge=1)
    max_completion_length: int = Field(default=16, ge=1)
    learning_rate: float = Field(default=1e-5, gt=0)
    temperature: float = Field(default=1.0, gt=0)
    beta: float = Field(default=0.0, ge=0, description="KL coefficient; 0 loads no reference")
    seed: int = 0
    chat: bool | None = Field(
        default=None,
        description="send prompts as chat messages (default: if the model has a template)",
    )
    threads: int | None = Field(
        default=None,
        ge=1,
        description="torch CPU threads while training (default torch's); 1 when the server "
        "shares a small machine",
    )
    reward_timeout_s: float = Field(default=300.0, gt=0, description="per reward request")
    save_model: bool = True

    @model_validator(mode="after")
    def _spec_has_channels(self) -> TrainConfig:
        if not isinstance(self.spec.get("channels"), dict) or not self.spec["channels"]:
            raise ValueError('spec needs a non-empty "channels" object')
        if self.spec.get("advantage", "none") != "none":
            raise ValueError('spec "advantage" must be "none": GRPO normalizes the group itself')
        return self

    @property
    def batch_size(self) -> int:
        """Completions per optimizer step (``groups_per_step * num_generations``)."""
        return self.groups_per_step * self.num_generations

    @property
    def resolved_output_dir(self) -> Path:
        """``output_dir``, default ``<user data folder>/train/<run_id>`` (PLAUDIT_DATA_DIR when
        set): a 500 MB checkpoint must not land in whatever folder the command ran in."""
        return self.output_dir or default_train_root() / self.run_id
