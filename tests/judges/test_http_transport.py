"""The JSON the OpenAI-compatible judge sends and reads (judges/backends/http_transport.py)."""

from __future__ import annotations

import json
import math

import pytest

from judges.backends.http_transport import HttpReply, encode


def test_bodies_are_compact_utf8_json_with_string_keys() -> None:
    body = {"prompt": ["caf\u00e9 \u2014 ok"], "logit_bias": {32: 5.0}, "echo": True}
    raw = encode(body)
    assert b" " not in raw.replace("caf\u00e9 \u2014 ok".encode(), b"")
    assert "caf\u00e9".encode() in raw  # UTF-8, not \\u escapes
    assert json.loads(raw) == {**body, "logit_bias": {"32": 5.0}}


def test_replies_parse_with_infinities_as_json_reads_them() -> None:
    assert HttpReply(200, b'{"logprob": -0.25}').json() == {"logprob": -0.25}
    parsed = HttpReply(200, b'{"logprob": -Infinity, "x": NaN}').json()
    assert parsed["logprob"] == -math.inf and math.isnan(parsed["x"])
    with pytest.raises(ValueError):
        HttpReply(502, b"<html>bad gateway</html>").json()
