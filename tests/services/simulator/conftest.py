"""Fixtures of the trainer-hook tests: the SmolLM2 policy and a real ``plaudit serve simulator``
(subprocess, the embedded SmolLM2 as the simulated user), started once per session."""

from __future__ import annotations

import os
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.serving import serving


@pytest.fixture(scope="session")
def policy(model_cache_dir: Path) -> Any:
    """The policy: SmolLM2 as transformers loads it, with TRL-like ``args``."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from judges.backends.convert import resolve_model_dir

    model_dir = resolve_model_dir(None, model_cache_dir)
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    model = AutoModelForCausalLM.from_pretrained(str(model_dir)).eval()
    args = types.SimpleNamespace(max_completion_length=40, temperature=1.0)
    return types.SimpleNamespace(
        model=model, processing_class=tokenizer, args=args, model_dir=model_dir
    )


@pytest.fixture(scope="session")
def simulator_url(tmp_path_factory: pytest.TempPathFactory, model_cache_dir: Path) -> Iterator[str]:
    root = tmp_path_factory.mktemp("sim-server")
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("PLAUDIT_")},
        "HOME": str(root),
        "PLAUDIT_DATA_DIR": str(root / "data"),
        "PLAUDIT_MODEL_CACHE_DIR": str(model_cache_dir),
        "PLAUDIT_SIMULATOR_MAX_NEW_TOKENS": "16",
        "OMP_NUM_THREADS": "1",
    }
    with serving("simulator", root, env, within=240) as url:
        yield url


@pytest.fixture
def env(simulator_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("PLAUDIT_URL", simulator_url)
    monkeypatch.setenv("PLAUDIT_SIMULATOR_MAX_TURNS", "3")
    monkeypatch.setenv("PLAUDIT_SIMULATOR_TEMPERATURE", "0.7")
    return simulator_url
