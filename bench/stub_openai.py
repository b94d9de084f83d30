"""A stand-in OpenAI-compatible judge server that is never the bottleneck (issue 19).

A raw asyncio protocol (uvloop when installed) that answers every ``POST .../chat/completions``
with one canned reply: the first token ``A`` with top logprobs for ``A`` and ``B`` (so a
logprob pairwise judgment is ``ok``), and ``Verdict: [[A]]`` as the message. A
``POST .../completions`` (a batch of prompts in one call) gets one such choice per prompt.
Every answer waits ``delay_ms`` (set at start or through ``POST /_control``) with no limit on
how many wait at once, as a GPU server with free batch slots would.

Control routes, for the benchmark: ``GET /_stats`` (calls served), ``POST /_control`` with
``{"delay_ms": 50, "record": 64}`` (record the next 64 request bodies; 0 clears them) and
``GET /_recorded`` (the recorded calls: path and body).

Run: ``python -m bench.stub_openai --port 8001 --delay-ms 50``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any, cast

# Every slot letter a ``labels`` template may name (judges.fencing.LABEL_LETTERS), A and B, and
# the grades 1..9: whatever two letters or grades a prompt asks for are listed, as a real judge
# lists its likely next tokens. The first is the sampled token.
_LISTED = ["A", "B", *"CDEFGHJKLMNPQRSTUVWXYZ", *"123456789"]
_TOPS = [{"token": t, "logprob": -0.3 - 0.1 * i} for i, t in enumerate(_LISTED)]
_CHAT_REPLY = {
    "id": "stub",
    "object": "chat.completion",
    "model": "stub-judge",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "Verdict: [[A]]"},
            "logprobs": {"content": [{"token": "A", "logprob": -0.3, "top_logprobs": _TOPS}]},
            "finish_reason": "stop",
        }
    ],
    "usage": {"prompt_tokens": 300, "completion_tokens": 1, "total_tokens": 301},
}
_MODELS = {"object": "list", "data": [{"id": "stub-judge", "object": "model"}]}


def _response(status: int, body: bytes) -> bytes:
    head = (
        f"HTTP/1.1 {status} OK\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


_CHAT_BYTES = _response(200, json.dumps(_CHAT_REPLY).encode())


def _completions_reply(body: bytes) -> bytes:
    """One choice per prompt of a ``/completions`` call (a list of prompts, or one). With
    ``echo`` each choice also carries a log-probability for every prompt token (None for the
    first), as vLLM answers a teacher-forced scoring call."""
    try:
        request = json.loads(body)
        prompts = request.get("prompt", "")
    except (ValueError, AttributeError):
        return _response(400, b'{"error": {"message": "bad json"}}')
    if not isinstance(prompts, list) or (prompts and isinstance(prompts[0], int)):
        prompts = [prompts]
    tops = {t["token"]: t["logprob"] for t in _TOPS}
    choices = []
    for i, prompt in enumerate(prompts):
        logprobs: dict[str, Any] = {
            "tokens": ["A"],
            "token_logprobs": [-0.3],
            "top_logprobs": [tops],
        }
        if request.get("echo"):
            length = len(prompt) if isinstance(prompt, list) else len(str(prompt).split())
            logprobs["token_logprobs"] = [None, *([-1.0] * (length - 1)), -0.3]
            logprobs["tokens"] = ["t"] * length + ["A"]
            logprobs["top_logprobs"] = [None] * length + [tops]
        choices.append({"index": i, "text": "A", "finish_reason": "stop", "logprobs": logprobs})
    return _response(200, json.dumps({"object": "text_completion", "choices": choices}).encode())


class StubState:
    """What every connection shares: the delay, the call count, the recorder."""

    def __init__(self, delay_ms: float) -> None:
        self.delay_s = delay_ms / 1000
        self.calls = 0
        self.record_left = 0
        self.recorded: list[dict[str, str]] = []

    def control(self, body: bytes) -> bytes:
        settings: dict[str, Any] = json.loads(body or b"{}")
        if "delay_ms" in settings:
            self.delay_s = float(settings["delay_ms"]) / 1000
        if "record" in settings:
            self.record_left = int(settings["record"])
            self.recorded = []
        return _response(200, b"{}")

    def answer(self, method: bytes, path: bytes, body: bytes) -> tuple[bytes, bool]:
        """The response bytes, and whether it is a judge call (delayed and counted)."""
        if path.endswith(b"/chat/completions"):
            self._note(path, body)
            return _CHAT_BYTES, True
        if path.endswith(b"/completions"):
            self._note(path, body)
            return _completions_reply(body), True
        if path.endswith(b"/models"):
            return _response(200, json.dumps(_MODELS).encode()), False
        if path == b"/_stats":
            return _response(200, json.dumps({"calls": self.calls}).encode()), False
        if path == b"/_control" and method == b"POST":
            return self.control(body), False
        if path == b"/_recorded":
            return _response(200, json.dumps(self.recorded).encode()), False
        return _response(404, b'{"error": {"message": "not found"}}'), False

    def _note(self, path: bytes, body: bytes) -> None:
        self.calls += 1
        if self.record_left > 0:
            self.record_left -= 1
            self.recorded.append({"path": path.decode(), "body": body.decode()})


class StubProtocol(asyncio.Protocol):
    """HTTP/1.1 keep-alive, one request at a time per connection (as HTTP clients send)."""

    def __init__(self, state: StubState) -> None:
        self.state = state
        self.buffer = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while (request := self._next_request()) is not None:
            method, path, body = request
            reply, delayed = self.state.answer(method, path, body)
            if delayed and self.state.delay_s > 0:
                asyncio.get_running_loop().call_later(self.state.delay_s, self._write, reply)
            else:
                self._write(reply)

    def _next_request(self) -> tuple[bytes, bytes, bytes] | None:
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0:
            return None
        head = self.buffer[:end]
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        if len(self.buffer) < end + 4 + length:
            return None
        body = self.buffer[end + 4 : end + 4 + length]
        self.buffer = self.buffer[end + 4 + length :]
        method, path, _ = head.split(b" ", 2)
        return method, path, body

    def _write(self, reply: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(reply)


async def serve(host: str, port: int, delay_ms: float) -> None:
    """Serve until cancelled."""
    state = StubState(delay_ms)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: StubProtocol(state), host, port, backlog=4096)
    async with server:
        await server.serve_forever()


def raise_open_files_limit() -> None:
    """Thousands of connections at once (64 clients x 56 calls): lift the soft fd limit."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        resource.setrlimit(
            resource.RLIMIT_NOFILE, (hard if hard != resource.RLIM_INFINITY else 65536, hard)
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--delay-ms", type=float, default=0.0)
    args = parser.parse_args()
    raise_open_files_limit()
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    asyncio.run(serve(args.host, args.port, args.delay_ms))


if __name__ == "__main__":
    main()
