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
def served(
    tmp_path_factory: pytest.TempPathFactory, model_cache_dir: Path
) -> Iterator[tuple[str, Path]]:
    """The server's base URL and its log file."""
    port = _free_port()
    data = tmp_path_factory.mktemp("serve-data")
    log_path = data / "serve.log"  # a file, not a pipe nobody drains
    env = {
        **os.environ,
        "PLAUDIT_DATA_DIR": str(data),
        "PLAUDIT_MODEL_CACHE_DIR": str(model_cache_dir),  # the converted judge, kept across runs
        "PLAUDIT_LOG_LEVEL": "WARNING",
    }
    for name in ("PLAUDIT_DATABASE_URL", "PLAUDIT_REDIS_URL", "PLAUDIT_API_KEYS"):
        env.pop(name, None)
    plaudit = Path(sys.executable).with_name("plaudit")
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [str(plaudit), "serve", "all", "--host", "127.0.0.1", "--port", str(port)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(base, proc, log_path)
        yield base, log_path
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        assert (data / "plaudit.db").exists(), "the embedded default keeps a SQLite file"


def _wait_ready(base: str, proc: subprocess.Popen[bytes], log_path: Path) -> None:
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"plaudit serve exited early:\n{log_path.read_text()}")
        try:
            if httpx.get(f"{base}/health/ready", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    raise AssertionError("plaudit serve never became ready")


@pytest.fixture(scope="module")
def server(served: tuple[str, Path]) -> str:
    return served[0]


def test_model_loads_draw_no_progress_bars_in_the_log(served: tuple[str, Path]) -> None:
    """Ready means the models have loaded; each load is one log line, not a tqdm bar."""
    log = served[1].read_text()
    assert "it/s]" not in log and "Loading weights" not in log, log[-2000:]


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
