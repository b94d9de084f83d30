"""A scripted stand-in HTTP server on loopback, for the client's retry tests.

It answers each request with the next :class:`Reply` of its script (then ``then`` forever) and
records what it saw, headers included, so a test can check what the client sent on every
attempt. A ``hang`` reply holds the connection open without answering until the test ends.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Reply:
    status: int = 200
    body: Any = field(default_factory=lambda: {"ok": True})  # JSON, or a str sent as text
    headers: dict[str, str] = field(default_factory=dict)
    hang: bool = False


@dataclass(frozen=True)
class Seen:
    method: str
    path: str
    headers: dict[str, str]  # lower-cased names
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def envelope(status: int, error_type: str, message: str, param: str | None = None) -> Reply:
    """A reply in Plaudit's error envelope, with a request id in the body and the header."""
    request_id = f"req_standin_{status}"
    body = {
        "error": {"type": error_type, "message": message, "param": param, "request_id": request_id}
    }
    return Reply(status, body, {"X-Request-ID": request_id})


class StandIn:
    """Serve ``script`` (then ``then``) on 127.0.0.1 in a background thread."""

    def __init__(self, script: list[Reply], then: Reply | None = None) -> None:
        self._script = list(script)
        self._then = then or Reply()
        self._lock = threading.Lock()
        self.release = threading.Event()
        self.requests: list[Seen] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def _serve(self) -> None:
        self._server.serve_forever(poll_interval=0.02)  # a short poll: a quick shutdown()

    def start(self) -> StandIn:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.release.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def record(self, seen: Seen) -> Reply:
        with self._lock:
            self.requests.append(seen)
            return self._script.pop(0) if self._script else self._then


def _handler(standin: StandIn) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            self._answer()

        def do_POST(self) -> None:
            self._answer()

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep the test output clean

        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            headers = {k.lower(): v for k, v in self.headers.items()}
            seen = Seen(self.command, self.path, headers, self.rfile.read(length))
            reply = standin.record(seen)
            if reply.hang:
                standin.release.wait(timeout=30)
                self.close_connection = True
                return
            self._send(reply)

        def _send(self, reply: Reply) -> None:
            is_text = isinstance(reply.body, str)
            raw = (reply.body if is_text else json.dumps(reply.body)).encode()
            self.send_response(reply.status)
            kind = "text/plain" if is_text else "application/json"
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(raw)))
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(raw)

    return Handler
