"""Fixtures of the client tests: the real Plaudit server over TCP, and scripted stand-ins."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.client.standin import Reply, StandIn

READY_WITHIN_S = 60.0
REWARD_KEY = "client-test-reward-key"
ADMIN_ONLY_KEY = "client-test-admin-key"


@dataclass(frozen=True)
class LiveServer:
    url: str
    reward_key: str = REWARD_KEY
    admin_only_key: str = ADMIN_ONLY_KEY


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _wait_ready(url: str, proc: subprocess.Popen[bytes], log_path: Path) -> None:
    deadline = time.monotonic() + READY_WITHIN_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"plaudit serve exited ({proc.returncode}):\n{log_path.read_text()}")
        try:
            if httpx.get(f"{url}/health/ready", timeout=1.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    pytest.fail(f"plaudit serve was not ready in {READY_WITHIN_S}s:\n{log_path.read_text()}")


@pytest.fixture(scope="session")
def live_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """``plaudit serve ordinal`` on a free loopback port, with its own data dir and API keys."""
    root = tmp_path_factory.mktemp("plaudit-live")
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLAUDIT_")}
    env["PLAUDIT_DATA_DIR"] = str(root / "data")
    env["PLAUDIT_API_KEYS"] = f'{{"{REWARD_KEY}": ["reward"], "{ADMIN_ONLY_KEY}": ["admin"]}}'
    binary = Path(sys.executable).with_name("plaudit")
    log_path = root / "serve.log"
    with log_path.open("wb") as log:
        # cwd is the temp dir, so no stray .env file configures the server.
        proc = subprocess.Popen(
            [str(binary), "serve", "ordinal", "--host", "127.0.0.1", "--port", str(port)],
            cwd=root,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(url, proc, log_path)
        yield LiveServer(url)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


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


@contextlib.contextmanager
def _serving(service: str, root: Path, env: dict[str, str], within: float) -> Iterator[str]:
    """``plaudit <service>`` on a free loopback port until the block exits; yields its URL."""
    port = _free_port()
    log_path = root / "serve.log"
    binary = Path(sys.executable).with_name("plaudit")
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [str(binary), "serve", service, "--host", "127.0.0.1", "--port", str(port)],
            cwd=root,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + within
        while not _answers_ready(url, proc, log_path):
            if time.monotonic() > deadline:
                pytest.fail(
                    f"plaudit serve {service} not ready in {within}s:\n{log_path.read_text()}"
                )
            time.sleep(0.25)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _answers_ready(url: str, proc: subprocess.Popen[bytes], log_path: Path) -> bool:
    if proc.poll() is not None:
        pytest.fail(f"plaudit serve exited ({proc.returncode}):\n{log_path.read_text()}")
    try:
        return httpx.get(f"{url}/health/ready", timeout=2.0).status_code == 200
    except httpx.TransportError:
        return False


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
    with _serving("all", root, env, ALL_READY_WITHIN_S) as url:
        yield LiveServer(url)
