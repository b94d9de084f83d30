"""``uvicorn services...:create_app --factory`` bound to every address, without the plaudit
command's checks: the app itself answers loopback callers only when it has no API keys."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.serving import free_port

pytestmark = pytest.mark.slow
ADV = {"groups": [{"scores": [1, 2]}], "k": 2}


def _outside_address() -> str | None:
    """This machine's non-loopback address, if it has one (no packet is sent)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            sock.connect(("10.255.255.255", 9))
        except OSError:
            return None
        address: str = sock.getsockname()[0]
    return None if address.startswith("127.") else address


@pytest.fixture
def open_server(tmp_path: Path) -> Iterator[int]:
    port = free_port()
    env = {**os.environ, "PLAUDIT_DATA_DIR": str(tmp_path), "PLAUDIT_LOG_LEVEL": "WARNING"}
    for name in ("PLAUDIT_DATABASE_URL", "PLAUDIT_REDIS_URL", "PLAUDIT_API_KEYS", "PLAUDIT_HOST"):
        env.pop(name, None)
    log = (tmp_path / "uvicorn.log").open("wb")
    args = ["-m", "uvicorn", "services.ordinal.app:create_app", "--factory"]
    proc = subprocess.Popen(
        [sys.executable, *args, "--host", "0.0.0.0", "--port", str(port)],
        cwd=tmp_path,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        for _ in range(600):  # a readiness wait, not a test limit
            if proc.poll() is not None:
                pytest.fail((tmp_path / "uvicorn.log").read_text())
            try:
                httpx.get(f"http://127.0.0.1:{port}/health/live", timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        log.close()


def test_an_open_server_refuses_other_hosts(open_server: int) -> None:
    outside = _outside_address()
    if outside is None:
        pytest.skip("this machine has no non-loopback address")
    local = httpx.post(f"http://127.0.0.1:{open_server}/v1/ordinal/advantages", json=ADV)
    assert local.status_code == 200, local.text
    remote = httpx.post(f"http://{outside}:{open_server}/v1/ordinal/advantages", json=ADV)
    assert remote.status_code == 403
    assert "loopback" in remote.json()["error"]["message"]
