"""Following a server's jobs over HTTP (``plaudit jobs`` and ``plaudit eval judge --server``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from services.cli.progress import ProgressDisplay
from trainer_client import PlauditClient
from trainer_client.config import Timeouts

FINISHED = frozenset({"succeeded", "failed", "cancelled"})


def connect(server: str, api_key: str | None) -> PlauditClient:
    """A client for ``server``; job calls are short, but a busy server may answer slowly."""
    return PlauditClient(server, api_key=api_key, timeout=Timeouts(read=120.0))


def follow(
    client: PlauditClient,
    job_id: str,
    display: ProgressDisplay,
    *,
    interval: float = 1.0,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """Poll the job every ``interval`` seconds, showing its progress, until it finishes;
    returns the finished job with its result."""
    path = f"/v1/jobs/{job_id}"
    while True:
        job: dict[str, Any] = client.request("GET", path, params={"view": "summary"})
        progress = job["progress"]
        display.update(progress["done"], progress["total"], progress["stage"] or job["state"])
        if job["state"] in FINISHED:
            break
        sleep(interval)
    display.close()
    finished: dict[str, Any] = client.request("GET", path)
    return finished


def describe(job: dict[str, Any]) -> str:
    """One line: id, kind, state, progress and (when failed) the error."""
    progress = job["progress"]
    total = "?" if progress["total"] is None else progress["total"]
    line = f"{job['id']}  {job['kind']:20} {job['state']:10} {progress['done']}/{total}"
    if progress["stage"]:
        line += f" {progress['stage']}"
    if job.get("error"):
        line += f"  error: {job['error']}"
    return line
