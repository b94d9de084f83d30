"""Is Plaudit the bottleneck in front of a fast judge? Direct against through Plaudit (issue 19).

One run starts a stand-in OpenAI-compatible judge (:mod:`bench.stub_openai`, its own process,
no limit on calls in flight) and a real ``plaudit serve all`` with
``PLAUDIT_JUDGE_BACKEND=openai`` pointed at it. For each judge latency (``instant``, ``50ms``),
each route (``/v1/judge/pairwise``, ``/v1/judge/group`` G=8 round robin, ``/v1/rewards/group``
G=8 with a round-robin ``judge_pairwise`` channel) and each client count, it measures:

- *direct*: the upstream calls of one Plaudit request, with the exact bodies Plaudit sent
  (recorded by the stand-in), sent at once straight to the judge, ``clients`` of them at a time;
- *through Plaudit*: the route itself, the judge cache off (``"cache": false``; the rewards
  route's texts differ per request, so its cache never hits).

Each row gives both rates, their ratio, the upstream calls per request and the Plaudit
server's CPU time (its processes' user + system) per upstream call. ``--profile FILE`` instead
runs one level under py-spy and prints where Plaudit's samples go.

Run (niced; other work on the machine is noise, so repeat):

    nice -n 10 .venv/bin/python -m bench.bench_overhead --out overhead.json
    nice -n 10 .venv/bin/python -m bench.bench_overhead --judges 50ms --routes pairwise \\
        --clients 64 --profile profile.txt
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import psutil

from bench.common import free_port, machine
from bench.overhead import DIRECT, PLAUDIT, Phase, markdown, profile_shares, rows
from bench.stub_openai import raise_open_files_limit

JUDGES = {"instant": 0.0, "50ms": 50.0}
ROUTES = {
    "pairwise": "/v1/judge/pairwise",
    "group": "/v1/judge/group",
    "rewards": "/v1/rewards/group",
}
# py-spy frames read "function (package/module.py:line)"; a sample goes to its leaf-most match.
PROFILE_GROUPS: dict[str, Sequence[str]] = {
    "idle (waiting for I/O)": ["(selectors.py", "Runner.run (asyncio/runners.py"],
    "http client (httpx/httpcore/anyio/h11)": ["(httpx/", "(httpcore/", "(anyio/", "(h11/"],
    "http client (aiohttp)": ["(aiohttp/", "(yarl/", "(multidict/"],
    "logging": ["(logging/"],
    "json": ["(json/"],
    "templates and fences": ["(judges/templates", "(judges/fencing"],
    "pydantic": ["(pydantic"],
    "starlette/fastapi/uvicorn": ["(starlette/", "(fastapi/", "(uvicorn/"],
    "plaudit (other)": ["(services/", "(judges/"],
    "asyncio event loop": ["(asyncio/", "(uvloop"],
}
# The event loop's thread (uvicorn's asyncio.run), without the imports of start-up.
PROFILE_FILTER: dict[str, Any] = {"within": "(asyncio/runners.py", "skip": ["importlib"]}
SENTENCE = (
    "The answer explains the steps one by one, checks the arithmetic, and names the unit "
    "of the result so that a reader can follow it. "
)


def request_body(route: str, index: int) -> dict[str, Any]:
    """A request whose texts differ by ``index`` (no cache can serve a repeat)."""
    prompt = f"Question {index}: how many minutes are there in {index % 97 + 2} hours?"
    texts = [f"Answer {index}.{k}: {SENTENCE * (2 + k % 3)}" for k in range(8)]
    if route == "pairwise":
        return {"prompt": prompt, "response_a": texts[0], "response_b": texts[1], "cache": False}
    if route == "group":
        return {"prompt": prompt, "completions": texts, "pairing": "round_robin", "cache": False}
    channel = {"weight": 1.0, "pairing": "round_robin"}
    return {
        "prompt": prompt,
        "completions": texts,
        "spec": {"channels": {"judge_pairwise": channel}, "advantage": "grpo"},
    }


@dataclass
class Target:
    """The two servers of a run and the Plaudit process whose CPU is counted."""

    stub: str
    plaudit: str
    pid: int

    def cpu_seconds(self) -> float:
        """User + system time of the Plaudit process and its children (workers)."""
        with contextlib.suppress(psutil.Error):
            root = psutil.Process(self.pid)
            procs = [root, *root.children(recursive=True)]
            return float(sum(t.user + t.system for t in (p.cpu_times() for p in procs)))
        return 0.0


@contextlib.contextmanager
def started(
    cmd: list[str], env: dict[str, str], log: Path, ready_url: str, within: float = 120.0
) -> Iterator[int]:
    """Run ``cmd`` in ``log``'s folder until the block ends (SIGINT, then kill); wait until
    ``ready_url`` answers 200 (at most ``within`` seconds)."""
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, cwd=log.parent, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        try:
            _wait_ready(ready_url, proc, within)
        except RuntimeError as exc:
            tail = log.read_text(errors="replace").splitlines()[-15:]
            raise RuntimeError("\n".join([str(exc), f"last lines of {log}:", *tail])) from None
        yield proc.pid
    finally:
        proc.send_signal(2)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _wait_ready(url: str, proc: subprocess.Popen[bytes], within: float) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{url}: the server exited with {proc.returncode}")
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(url, timeout=2).status_code == 200:
                return
        time.sleep(0.3)
    raise RuntimeError(f"{url} never became ready")


@contextlib.contextmanager
def servers(args: argparse.Namespace, workdir: Path) -> Iterator[Target]:
    """The stand-in judge and a Plaudit server in front of it."""
    stub_port, port = free_port(), free_port()
    stub = f"http://127.0.0.1:{stub_port}"
    python = sys.executable
    stub_cmd = [python, str(Path(__file__).with_name("stub_openai.py")), "--port", str(stub_port)]
    with started(stub_cmd, dict(os.environ), workdir / "stub.log", f"{stub}/v1/models"):
        env = plaudit_env(args, stub, workdir)
        script = Path(python).with_name("plaudit")
        plaudit = [str(script)] if script.exists() else [python, "-m", "services.cli"]
        cmd = [*plaudit, "serve", args.service]
        cmd += ["--host", "127.0.0.1"]
        cmd += ["--port", str(port), "--workers", str(args.workers)]
        if args.profile:
            spy = str(Path(python).with_name("py-spy"))
            cmd = [
                spy,
                "record",
                "--format",
                "raw",
                "--nonblocking",
                "-r",
                "200",
                "-o",
                args.profile,
                "-s",
                "--",
                *cmd,
            ]
        base = f"http://127.0.0.1:{port}"
        with started(cmd, env, workdir / "plaudit.log", f"{base}/health/ready") as pid:
            yield Target(stub, base, pid)


def plaudit_env(args: argparse.Namespace, stub: str, workdir: Path) -> dict[str, str]:
    env = {
        **os.environ,
        "PLAUDIT_DATA_DIR": str(workdir / "data"),
        "PLAUDIT_JUDGE_BACKEND": "openai",
        "PLAUDIT_JUDGE_BASE_URL": f"{stub}/v1",
        "PLAUDIT_JUDGE_MODEL": "stub-judge",
    }
    for pair in args.env:
        key, _, value = pair.partition("=")
        env[key] = value
    return env


async def _stub_json(session: aiohttp.ClientSession, url: str, body: Any = None) -> Any:
    if body is None:
        async with session.get(url) as response:
            return await response.json()
    async with session.post(url, json=body) as response:
        return await response.json()


Call = tuple[str, bytes]


async def record_calls(
    session: aiohttp.ClientSession, target: Target, route: str, index: int
) -> list[Call]:
    """The upstream calls (path, body) of one Plaudit request to ``route``, as recorded by
    the stand-in."""
    await _stub_json(session, f"{target.stub}/_control", {"record": 10_000})
    async with session.post(target.plaudit + ROUTES[route], json=request_body(route, index)) as r:
        if r.status != 200:
            raise RuntimeError(f"{route}: {r.status} {await r.text()}")
    recorded = await _stub_json(session, f"{target.stub}/_recorded")
    await _stub_json(session, f"{target.stub}/_control", {"record": 0})
    if not recorded:
        raise RuntimeError(f"{route}: Plaudit made no upstream call (a cache hit?)")
    return [(call["path"], call["body"].encode()) for call in recorded]


Send = Callable[[int], Awaitable[bool]]


def direct_sender(session: aiohttp.ClientSession, target: Target, calls: list[Call]) -> Send:
    headers = {"content-type": "application/json"}

    async def call(path: str, body: bytes) -> bool:
        async with session.post(target.stub + path, data=body, headers=headers) as response:
            await response.read()
            return response.status == 200

    async def send(_: int) -> bool:
        return all(await asyncio.gather(*(call(path, body) for path, body in calls)))

    return send


def plaudit_sender(
    session: aiohttp.ClientSession, target: Target, route: str, indices: Iterator[int]
) -> Send:
    """Each request with texts never sent before in this run (``indices`` is run-wide), so
    the rewards route's judge cache never hits."""
    url = target.plaudit + ROUTES[route]

    async def send(_: int) -> bool:
        async with session.post(url, json=request_body(route, next(indices))) as response:
            body = await response.read()
            if response.status != 200:
                print(f"{route}: HTTP {response.status} {body[:300]!r}", file=sys.stderr)
            return response.status == 200

    return send


async def load(
    send: Send, clients: int, *, requests: int | None, seconds: float
) -> tuple[int, int, float]:
    """``clients`` loops sending back to back until ``requests`` are done (or ``seconds``
    pass); returns (succeeded, failed, elapsed)."""
    counts = {"next": 0, "ok": 0, "failed": 0}
    start = time.perf_counter()
    deadline = start + seconds

    async def client() -> None:
        while (requests is None and time.perf_counter() < deadline) or (
            requests is not None and counts["next"] < requests
        ):
            counts["next"] += 1
            try:
                ok = await send(counts["next"])
            except (aiohttp.ClientError, TimeoutError) as exc:
                print(f"request failed: {type(exc).__name__}: {exc}", file=sys.stderr)
                ok = False
            counts["ok" if ok else "failed"] += 1

    await asyncio.gather(*(client() for _ in range(clients)))
    return counts["ok"], counts["failed"], time.perf_counter() - start


async def measure(
    session: aiohttp.ClientSession,
    target: Target,
    key: tuple[str, str, int, str],
    send: Send,
    args: argparse.Namespace,
) -> Phase:
    judge, route, clients, mode = key
    await load(send, clients, requests=min(clients, 16), seconds=0)  # warm up: connections
    calls_before = (await _stub_json(session, f"{target.stub}/_stats"))["calls"]
    cpu_before = target.cpu_seconds()
    ok, failed, elapsed = await load(send, clients, requests=args.requests, seconds=args.seconds)
    cpu = target.cpu_seconds() - cpu_before if mode == PLAUDIT else 0.0
    calls = (await _stub_json(session, f"{target.stub}/_stats"))["calls"] - calls_before
    return Phase(judge, route, clients, mode, ok, failed, elapsed, calls, cpu)


async def run(args: argparse.Namespace, target: Target) -> list[Phase]:
    """The whole matrix; each phase printed as a JSON line as soon as it is measured."""
    phases: list[Phase] = []
    # Idle connections close on this side before the server (uvicorn: 5 s) closes them, so a
    # request never goes out on a connection the server is closing (ServerDisconnectedError).
    connector = aiohttp.TCPConnector(limit=args.connections, keepalive_timeout=2.0)
    timeout = aiohttp.ClientTimeout(total=600)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        for judge in args.judges:
            await _stub_json(session, f"{target.stub}/_control", {"delay_ms": JUDGES[judge]})
            for route in args.routes:
                phases += await run_route(session, target, (judge, route), args)
    return phases


async def run_route(
    session: aiohttp.ClientSession,
    target: Target,
    judge_route: tuple[str, str],
    args: argparse.Namespace,
) -> list[Phase]:
    """Direct then through Plaudit at every client count, ``repeat`` times over."""
    judge, route = judge_route
    indices = args.indices
    calls = await record_calls(session, target, route, next(indices))
    senders = {
        DIRECT: direct_sender(session, target, calls),
        PLAUDIT: plaudit_sender(session, target, route, indices),
    }
    phases = []
    for _ in range(args.repeat):
        for clients in args.clients:
            for mode, send in senders.items():
                phase = await measure(session, target, (judge, route, clients, mode), send, args)
                print(json.dumps(asdict(phase)), flush=True)
                phases.append(phase)
    return phases


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--judges", nargs="+", default=list(JUDGES), choices=list(JUDGES))
    parser.add_argument("--routes", nargs="+", default=list(ROUTES), choices=list(ROUTES))
    parser.add_argument("--clients", nargs="+", type=int, default=[1, 16, 64, 256])
    parser.add_argument("--seconds", type=float, default=4.0, help="per phase")
    parser.add_argument(
        "--requests", type=int, default=None, help="per phase, instead of --seconds"
    )
    parser.add_argument("--repeat", type=int, default=1, help="the matrix, interleaved")
    parser.add_argument(
        "--service", default="all", help="plaudit serve SERVICE (judge: no rewards)"
    )
    parser.add_argument("--workers", type=int, default=1, help="plaudit serve --workers")
    parser.add_argument("--env", action="append", default=[], help="KEY=VALUE for Plaudit")
    parser.add_argument("--profile", default=None, help="py-spy raw profile file")
    parser.add_argument(
        "--connections", type=int, default=1024, help="the load generator's connection cap"
    )
    parser.add_argument("--out", default=None, help="JSON results file")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    args.indices = itertools.count(1)
    raise_open_files_limit()
    with (
        tempfile.TemporaryDirectory(prefix="plaudit-overhead-") as tmp,
        servers(args, Path(tmp)) as target,
    ):
        phases = asyncio.run(run(args, target))
    table = rows(phases)
    result = {
        "machine": machine(),
        "args": {k: v for k, v in vars(args).items() if k != "indices"},
        "phases": [asdict(p) for p in phases],
        "rows": [r.as_dict() for r in table],
    }
    print(markdown(table))
    if args.profile:
        with open(args.profile) as f:
            result["profile"] = profile_shares(f, PROFILE_GROUPS, **PROFILE_FILTER)
        print(json.dumps(result["profile"], indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
