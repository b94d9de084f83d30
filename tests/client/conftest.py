"""Fixtures of the client tests: the real Plaudit server over TCP, and scripted stand-ins."""

from __future__ import annotations

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
