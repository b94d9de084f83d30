"""A real ``plaudit serve all`` (embedded default) on a free port, for the trainer tests."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, model_cache_dir: Path) -> Iterator[str]:
    """The server's base URL; its own data dir, the shared converted-model cache."""
    port = free_port()
    data = tmp_path_factory.mktemp("train-serve-data")
    env = {
        **os.environ,
        "PLAUDIT_DATA_DIR": str(data),
        "PLAUDIT_MODEL_CACHE_DIR": str(model_cache_dir),
        "PLAUDIT_LOG_LEVEL": "WARNING",
    }
    for name in ("PLAUDIT_DATABASE_URL", "PLAUDIT_REDIS_URL", "PLAUDIT_API_KEYS"):
        env.pop(name, None)
    plaudit = Path(sys.executable).with_name("plaudit")
    log_path = data / "serve.log"
    with log_path.open("wb") as log_file:  # a file, not a pipe nobody drains
        proc = subprocess.Popen(
            [str(plaudit), "serve", "all", "--host", "127.0.0.1", "--port", str(port)],
            env=env,
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(base, proc, log_path)
        yield base
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


def _wait_ready(base: str, proc: subprocess.Popen[bytes], log_path: Path) -> None:
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            out = log_path.read_text(errors="replace")
            raise AssertionError(f"plaudit serve exited early:\n{out}")
        try:
            if httpx.get(f"{base}/health/ready", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    raise AssertionError("plaudit serve never became ready")
