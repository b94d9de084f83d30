"""Fixtures of the client tests: the real Plaudit server over TCP, and scripted stand-ins."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.serving import serving
from tests.trainer_client.standin import Reply, StandIn

READY_WITHIN_S = 60.0
REWARD_KEY = "client-test-reward-key"
ADMIN_ONLY_KEY = "client-test-admin-key"


@dataclass(frozen=True)
class LiveServer:
    url: str
    reward_key: str = REWARD_KEY
    admin_only_key: str = ADMIN_ONLY_KEY


@pytest.fixture(scope="session")
def live_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """``plaudit serve ordinal`` on a free loopback port, with its own data dir and API keys."""
    root = tmp_path_factory.mktemp("plaudit-live")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLAUDIT_")}
    env["PLAUDIT_DATA_DIR"] = str(root / "data")
    env["PLAUDIT_API_KEYS"] = f'{{"{REWARD_KEY}": ["reward"], "{ADMIN_ONLY_KEY}": ["admin"]}}'
    with serving("ordinal", root, env, READY_WITHIN_S) as url:
        yield LiveServer(url)


@pytest.fixture
def standin() -> Iterator[Callable[..., StandIn]]:
    """A factory: ``standin([Reply(429, ...), Reply()], then=...)`` starts a scripted server."""
    started: list[StandIn] = []

    def start(script: list[Reply], then: Reply | None = None) -> StandIn:
        server = StandIn(script, then).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


#: ``plaudit serve all`` loads MiniLM and the SmolLM2 judge before it is ready.
ALL_READY_WITHIN_S = 240.0
#: The judge of the ``serve all`` fixture rejects longer inputs as ``invalid``, so a test can
#: make one completion of a group fail for real by making it long.
JUDGE_MAX_INPUT_TOKENS = 512


@pytest.fixture(scope="session")
def live_all_server(
    tmp_path_factory: pytest.TempPathFactory, model_cache_dir: Path
) -> Iterator[LiveServer]:
    """``plaudit serve all`` on the embedded default (SQLite, in-process cache) with the real
    MiniLM embedder and SmolLM2 judge, its own data dir and API keys, over TCP."""
    root = tmp_path_factory.mktemp("plaudit-all")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLAUDIT_")}
    env["PLAUDIT_DATA_DIR"] = str(root / "data")
    env["PLAUDIT_MODEL_CACHE_DIR"] = str(model_cache_dir)
    env["PLAUDIT_JUDGE_MAX_INPUT_TOKENS"] = str(JUDGE_MAX_INPUT_TOKENS)
    env["PLAUDIT_API_KEYS"] = f'{{"{REWARD_KEY}": ["reward"], "{ADMIN_ONLY_KEY}": ["admin"]}}'
    with serving("all", root, env, ALL_READY_WITHIN_S) as url:
        yield LiveServer(url)
