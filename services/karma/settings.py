"""KARMA settings: one section of :class:`services.core.settings.Settings` (``PLAUDIT_KARMA_*``)."""

from __future__ import annotations

from pathlib import Path

import platformdirs
from pydantic import BaseModel, Field

#: Where the shared reddit_karma data lives on the project's machines.
SHARED_DATA_DIR = Path("/work/shared/data/reddit_karma")


def default_models_dir() -> Path:
    """Trained KARMA models (``~/.cache/plaudit-karma/models`` on Linux)."""
    return Path(platformdirs.user_cache_dir("plaudit-karma", appauthor=False)) / "models"


class KarmaSettings(BaseModel):
    """``PLAUDIT_KARMA_DATA_DIR``, ``PLAUDIT_KARMA_MODELS_DIR``."""

    data_dir: Path = Field(
        default=SHARED_DATA_DIR,
        description="folder with threads/comments/pairs.jsonl.gz, used for --data reddit_karma",
    )
    models_dir: Path = Field(
        default_factory=default_models_dir, description="where `plaudit karma train` saves models"
    )
