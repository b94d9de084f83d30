"""Fixtures for the judges tests: the real SmolLM2, converted once per test session.

Set PLAUDIT_TEST_MODEL_CACHE to a directory to keep the converted checkpoint between
sessions (the first session converts, later ones reuse it).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import pytest_asyncio

if TYPE_CHECKING:
    from judges.backends.local import LocalBackend


@pytest.fixture(scope="session")
def model_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the bundled GGUF is converted (once per session, or kept via the env var)."""
    override = os.environ.get("PLAUDIT_TEST_MODEL_CACHE")
    if override:
        path = Path(override)
        path.mkdir(parents=True, exist_ok=True)
        return path
    return tmp_path_factory.mktemp("models")


@pytest.fixture(scope="session")
def smollm2_dir(model_cache_dir: Path) -> Path:
    """The converted SmolLM2 directory (converts on first use)."""
    pytest.importorskip("torch")
    pytest.importorskip("gguf")
    from judges.backends.convert import default_gguf_path, resolve_model_dir

    try:
        default_gguf_path()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
    return resolve_model_dir(None, model_cache_dir)


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def backend(smollm2_dir: Path, model_cache_dir: Path) -> AsyncIterator[LocalBackend]:
    """A started LocalBackend on the default model, shared by the session's tests."""
    from judges.backends.local import LocalBackend

    local = LocalBackend(cache_dir=model_cache_dir, max_batch_size=4)
    await local.start()
    yield local
    await local.aclose()
