"""KARMA settings: one section of :class:`services.core.settings.Settings` (``PLAUDIT_KARMA_*``)."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import platformdirs
from pydantic import Field

from services.core.settings import Section


def default_models_dir() -> Path:
    """Trained KARMA models (``~/.cache/plaudit-karma/models`` on Linux)."""
    return Path(platformdirs.user_cache_dir("plaudit-karma", appauthor=False)) / "models"


class KarmaSettings(Section):
    """``PLAUDIT_KARMA_DATA_DIR``, ``PLAUDIT_KARMA_MODELS_DIR``, ``PLAUDIT_KARMA_MODEL``, ..."""

    section_name: ClassVar[str] = "karma"

    data_dir: Path | None = Field(
        default=None,
        description="folder with threads/comments/pairs.jsonl.gz, used for --data reddit_karma "
        "(default: the reddit_karma dataset, `plaudit data fetch reddit_karma`)",
    )
    models_dir: Path = Field(
        default_factory=default_models_dir, description="where `plaudit karma train` saves models"
    )
    embeddings_dir: Path = Field(
        default_factory=lambda: default_models_dir().parent / "embeddings",
        description="sentence embeddings cached by content hash for the frozen-encoder method",
    )
    model: str = Field(
        default="karma",
        description="the artifact name trained models are saved under and scored from",
    )
    data_roots: list[Path] = Field(
        default_factory=list,
        description="more folders a training job may read data from (besides the data dir and "
        "data_dir above)",
    )
    device: str = Field(default="cpu", description="where served models run (cpu, cuda)")
    batch_size: int = Field(default=64, ge=1, le=4096, description="rows per forward pass")
    max_batch_rows: int = Field(
        default=64, ge=1, le=4096, description="rows of concurrent requests merged into one call"
    )
    max_wait_ms: float = Field(
        default=5.0, ge=0, le=1000, description="how long a call waits for more requests"
    )
    load_wait_s: float = Field(
        default=120.0, gt=0, description="how long a request waits for a model still loading"
    )
    refresh_s: float = Field(
        default=2.0,
        ge=0,
        description="how often the serving version is re-read from the store (a promotion in "
        "another process shows within this)",
    )
    loaded_models: int = Field(
        default=2, ge=1, le=16, description="model versions kept loaded at once"
    )
