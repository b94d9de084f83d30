"""A request uvicorn cannot parse gets the JSON envelope from ``plaudit serve``, not uvicorn's
plain-text 400 (issue 23, finding 10). The behaviour is uvicorn's, so the real process runs."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx
import pytest

from tests.serving import serving

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def ordinal_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("long-line")
    env = {**os.environ, "PLAUDIT_DATA_DIR": str(root), "PLAUDIT_LOG_LEVEL": "WARNING"}
    for name in ("PLAUDIT_DATABASE_URL", "PLAUDIT_REDIS_URL", "PLAUDIT_API_KEYS"):
        env.pop(name, None)
    with serving("ordinal", root, env, within=120) as url:
        yield url


def _send(url: str, request_line: bytes) -> tuple[bytes, bytes]:
    """The raw answer's head and body (httpx itself refuses URLs over 64 KiB)."""
    where = urlsplit(url)
    with socket.create_connection((where.hostname, where.port), timeout=30) as sock:
        sock.sendall(request_line + b"\r\nHost: x\r\nConnection: close\r\n\r\n")
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    return head, body


def _assert_envelope_400(head: bytes, body: bytes) -> dict[str, object]:
    assert head.startswith(b"HTTP/1.1 400"), head + body[:200]
    assert b"content-type: application/json" in head.lower(), head
    error: dict[str, object] = json.loads(body)["error"]
    assert error["type"] == "invalid_request" and error["message"], error
    assert f"x-request-id: {error['request_id']}".encode() in head.lower(), head
    return error


def test_a_query_string_too_long_to_parse_is_the_envelope(ordinal_url: str) -> None:
    # About 64 KiB is where uvicorn's parser gives up; 200,000 characters is well past it.
    head, body = _send(ordinal_url, b"GET /health/live?x=" + b"a" * 200_000 + b" HTTP/1.1")
    error = _assert_envelope_400(head, body)
    assert "longer than the server reads" in str(error["message"])


def test_a_malformed_request_line_is_the_envelope(ordinal_url: str) -> None:
    _assert_envelope_400(*_send(ordinal_url, b"GET /health/live HTTP/1.1 extra"))


def test_a_long_query_string_the_parser_reads_reaches_the_app(ordinal_url: str) -> None:
    # Below the parser's limit the app answers as usual (the envelope above is not a blanket
    # refusal of long URLs).
    fine = httpx.get(f"{ordinal_url}/health/live", params={"x": "a" * 10_000}, timeout=30)
    assert fine.status_code == 200, fine.text
