"""The real ``plaudit serve`` as a subprocess on a free loopback port, for tests over TCP."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import httpx
import pytest


def free_port() -> int:
    """A loopback port nothing listens on (at the time of asking)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextlib.contextmanager
def silent_port() -> Iterator[int]:
    """A loopback port that accepts connections (into its backlog) and never answers: a server
    that hangs, unlike one that is down."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield sock.getsockname()[1]


@contextlib.contextmanager
def serving(service: str, root: Path, env: Mapping[str, str], within: float) -> Iterator[str]:
    """``plaudit serve <service>`` until the block exits; yields its URL once it is ready.

    The server runs in ``root`` (so no stray ``.env`` configures it) and logs to
    ``root/serve.log``, a file rather than a pipe nobody drains; a server that exits or is not
    ready within ``within`` seconds fails the test with that log.
    """
    port = free_port()
    log_path = root / "serve.log"
    binary = Path(sys.executable).with_name("plaudit")
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [str(binary), "serve", service, "--host", "127.0.0.1", "--port", str(port)],
            cwd=root,
            env=dict(env),
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
