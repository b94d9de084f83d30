"""uvicorn's HTTP protocol, answering a request it cannot parse with the error envelope.

uvicorn refuses a request whose request line or headers its parser rejects (a query string of
about 64 KiB, a malformed line) before any ASGI app sees it, with a plain-text 400 ("Invalid
HTTP request received."). Every other error of Plaudit is the JSON envelope, so ``plaudit
serve`` runs uvicorn with this protocol class, which writes the same 400 as the envelope
(issue 23, finding 10).
"""

from __future__ import annotations

import json

from uvicorn.protocols.http.auto import AutoHTTPProtocol

from services.core.context import new_request_id

#: What the caller reads: the request never reached the app, so no field is named.
MESSAGE = (
    "the request line or headers could not be parsed: malformed HTTP, or a URL or header "
    "longer than the server reads (send long input in a JSON body)"
)


def envelope_400() -> bytes:
    """The raw HTTP/1.1 response: status line, headers and the JSON envelope."""
    request_id = new_request_id()
    body = json.dumps(
        {
            "error": {
                "type": "invalid_request",
                "message": MESSAGE,
                "param": None,
                "request_id": request_id,
            }
        }
    ).encode()
    head = (
        "HTTP/1.1 400 Bad Request\r\n"
        "content-type: application/json\r\n"
        f"content-length: {len(body)}\r\n"
        f"x-request-id: {request_id}\r\n"
        "connection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


class EnvelopeHTTPProtocol(AutoHTTPProtocol):  # type: ignore[misc,valid-type]
    """uvicorn's own protocol (httptools, else h11) with a JSON 400 for unparseable input."""

    def send_400_response(self, msg: str) -> None:
        self.transport.write(envelope_400())
        self.transport.close()
