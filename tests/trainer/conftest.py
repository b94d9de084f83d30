"""A real ``plaudit serve all`` (embedded default) on a free port, for the trainer tests."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.serving import serving

READY_WITHIN_S = 180.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, model_cache_dir: Path) -> Iterator[str]:
    """The server's base URL; its own data dir, the shared converted-model cache."""
    root = tmp_path_factory.mktemp("train-serve-data")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLAUDIT_")}
    env["PLAUDIT_DATA_DIR"] = str(root)
    env["PLAUDIT_MODEL_CACHE_DIR"] = str(model_cache_dir)
    env["PLAUDIT_LOG_LEVEL"] = "WARNING"
    with serving("all", root, env, READY_WITHIN_S) as url:
        yield url
