"""Helpers shared by the benchmarks: a real `plaudit serve` process, timing, machine info."""

from __future__ import annotations

import contextlib
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx


def machine() -> str:
    cpus = os.cpu_count()
    return f"{platform.machine()} {platform.processor() or ''} {cpus} CPUs, {platform.platform()}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def plaudit_server(service: str = "all", env: dict[str, str] | None = None) -> Iterator[str]:
    """Start `plaudit serve` on a free loopback port with a fresh data dir; yield its base URL."""
    port = free_port()
    data = tempfile.mkdtemp(prefix="plaudit-bench-")
    full_env = {
        **os.environ,
        "PLAUDIT_DATA_DIR": data,
        "PLAUDIT_LOG_LEVEL": "WARNING",
        **(env or {}),
    }
    plaudit = Path(sys.executable).with_name("plaudit")
    proc = subprocess.Popen(
        [str(plaudit), "serve", service, "--host", "127.0.0.1", "--port", str(port)],
        env=full_env,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{base}/health/ready", timeout=2).status_code == 200:
                    break
            time.sleep(0.5)
        else:
            raise RuntimeError("server never became ready")
        yield base
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


def best_of(fn: Callable[[], Any], repeats: int) -> tuple[float, list[float]]:
    """Median wall time of ``fn`` over ``repeats`` runs (after one warm-up), and all runs."""
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), times


def interleaved(fns: dict[str, Callable[[], Any]], repeats: int) -> dict[str, float]:
    """Median time of each function, runs interleaved so machine noise hits all alike."""
    for fn in fns.values():
        fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(ts) for name, ts in times.items()}
