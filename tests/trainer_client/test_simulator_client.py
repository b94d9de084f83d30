"""The simulator client (the multi-turn hooks' way to ``/v1/simulator/turn``) retries like the
reward client, on the same code (issue 22: it raised after 0.02 s on a refused connection or a
503, so a server restart killed a multi-turn step)."""

from __future__ import annotations

import asyncio
import socket

import pytest

from tests.trainer_client.standin import Reply, StandIn, envelope
from trainer_client import RetryPolicy
from trainer_client.simulator import SimulatorClient, SimulatorError

TURN = {
    "message": {"role": "user", "content": "And for a soft yolk?"},
    "done": False,
    "satisfaction": {"expected": 3.5, "distribution": [0.1, 0.1, 0.2, 0.3, 0.3]},
}
MESSAGES = [
    {"role": "user", "content": "How long should I boil an egg?"},
    {"role": "assistant", "content": "Ten minutes."},
]


def _free_port() -> int:
    with socket.socket() as sock:  # nothing listens there once the socket closes
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def test_a_restart_answering_503_is_ridden_out() -> None:
    """Ten 503s (a restart reloading models) with max_retries=2: the outage budget rides it
    out, as it does for reward requests, with one Idempotency-Key throughout."""
    server = StandIn([envelope(503, "backend_unavailable", "starting")] * 10, Reply(200, TURN))
    server.start()
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    client = SimulatorClient(server.url, retry=RetryPolicy(max_retries=2), sleep=sleep)
    try:
        said = await client.turn("a soft yolk", MESSAGES, seed=1)
    finally:
        await client.aclose()
        server.stop()
    assert said.text == "And for a soft yolk?" and said.satisfaction == 3.5
    assert len(sleeps) == 10 and len(server.requests) == 11
    assert len({seen.headers.get("idempotency-key") for seen in server.requests}) == 1


async def test_a_refused_connection_is_retried_until_the_server_is_back() -> None:
    """Nothing listens on the port at first (the server is down); the server comes back while
    the client waits, and the same turn is answered."""
    port = _free_port()
    started: list[asyncio.Server] = []

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        body = b'{"message": {"content": "Thanks."}, "done": true, "satisfaction": null}'
        head = f"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {len(body)}"
        writer.write(head.encode() + b"\r\nconnection: close\r\n\r\n" + body)
        await writer.drain()
        writer.close()

    async def sleep(seconds: float) -> None:
        if len(started) == 0 and len(waits) == 2:  # back up after two refused attempts
            started.append(await asyncio.start_server(answer, "127.0.0.1", port))
        waits.append(seconds)

    waits: list[float] = []
    client = SimulatorClient(f"http://127.0.0.1:{port}", sleep=sleep)
    try:
        said = await client.turn("a soft yolk", MESSAGES)
    finally:
        await client.aclose()
        for server in started:
            server.close()
    assert said.done and said.satisfaction is None and len(waits) == 3


async def test_a_rejected_turn_is_not_retried() -> None:
    server = StandIn([envelope(422, "invalid_request", "messages must end with the assistant")])
    server.start()
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    client = SimulatorClient(server.url, sleep=sleep)
    try:
        with pytest.raises(SimulatorError, match="messages must end") as raised:
            await client.turn("a soft yolk", MESSAGES)
    finally:
        await client.aclose()
        server.stop()
    assert sleeps == [] and len(server.requests) == 1
    assert raised.value.__cause__ is not None  # the client's typed error
