"""The real ``plaudit serve`` process on a free port, called over TCP."""

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

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, model_cache_dir: Path) -> Iterator[str]:
    port = _free_port()
    data = tmp_path_factory.mktemp("serve-data")
    env = {
        **os.environ,
        "PLAUDIT_DATA_DIR": str(data),
        "PLAUDIT_MODEL_CACHE_DIR": str(model_cache_dir),  # the converted judge, kept across runs
        "PLAUDIT_LOG_LEVEL": "WARNING",
    }
    for name in ("PLAUDIT_DATABASE_URL", "PLAUDIT_REDIS_URL", "PLAUDIT_API_KEYS"):
        env.pop(name, None)
    plaudit = Path(sys.executable).with_name("plaudit")
    proc = subprocess.Popen(
        [str(plaudit), "serve", "all", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(base, proc)
        yield base
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        assert (data / "plaudit.db").exists(), "the embedded default keeps a SQLite file"


def _wait_ready(base: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            out = proc.stdout.read().decode() if proc.stdout else ""
            raise AssertionError(f"plaudit serve exited early:\n{out}")
        try:
            if httpx.get(f"{base}/health/ready", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    raise AssertionError("plaudit serve never became ready")


def test_served_over_tcp(server: str) -> None:
    with httpx.Client(base_url=server, timeout=60) as client:
        adv = client.post(
            "/v1/ordinal/advantages", json={"groups": [{"scores": [1, 2, 3]}], "k": 3}
        )
        assert adv.status_code == 200 and adv.json()["kind"] == "advantages"
        div = client.post(
            "/v1/diversity/group",
            json={"completions": ["a red apple", "a green apple", "quantum chromodynamics"]},
        )
        assert div.status_code == 200, div.text
        rewards = div.json()["rewards"]
        assert rewards[2] == 1.0 and min(rewards) == 0.0
        bad = client.post("/v1/ordinal/advantages", json={"groups": []})
        assert bad.status_code == 422 and bad.json()["error"]["param"] == "groups"
        assert client.get("/docs").status_code == 200
        assert "plaudit_request_latency_seconds" in client.get("/metrics").text
        judged = client.post(
            "/v1/judge/pairwise",
            json={"prompt": "2 + 2?", "response_a": "4", "response_b": "5", "swap": False},
        )
        assert judged.status_code == 200 and judged.json()["status"] == "ok"
