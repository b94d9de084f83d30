"""Simulator settings: one section of :class:`services.core.settings.Settings`
(``PLAUDIT_SIMULATOR_*``)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field


class SimulatorSettings(BaseModel):
    """``PLAUDIT_SIMULATOR_BACKEND``, ``PLAUDIT_SIMULATOR_BASE_URL``, ..."""

    backend: Literal["judge", "local", "openai"] = Field(
        default="judge",
        description="the uncalibrated simulator's model: 'judge' shares the judge's backend "
        "(the embedded SmolLM2-135M by default, no second copy in memory), 'local' loads its "
        "own (model below), 'openai' calls an OpenAI-compatible server (base_url, model)",
    )
    model: str | None = Field(
        default=None,
        description="local: a HF folder or GGUF (default SmolLM2-135M-Instruct); openai: the "
        "served model's name",
    )
    base_url: str | None = Field(default=None, description="openai: the server's URL with /v1")
    api_key: str | None = Field(default=None, description="openai: its key")
    data_dir: Path | None = Field(
        default=None,
        description="folder with sgd/mwoz/ccpe.jsonl.gz (USS format; default: the uss dataset, "
        "`plaudit data fetch uss`)",
    )
    data_roots: list[Path] = Field(
        default_factory=list,
        description="more folders a calibration job or an evaluation may read dialogues from",
    )
    max_messages: int = Field(
        default=64, ge=2, le=1000, description="most messages one turn request may carry"
    )
    max_new_tokens: int = Field(
        default=64, ge=1, le=1024, description="longest user message generated (tokens)"
    )
    loaded_calibrations: int = Field(
        default=2, ge=1, le=16, description="calibrated models kept loaded at once"
    )
    episode_timeout_s: float = Field(
        default=60.0, gt=0, le=600, description="how long one policy call of an episode may take"
    )
    allow_private_policy_urls: bool = Field(
        default=True,
        description="let /v1/simulator/episodes call policy URLs on loopback and private "
        "networks (the usual place of a policy being trained); false in shared deployments",
    )
