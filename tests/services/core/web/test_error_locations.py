"""Validation error locations become the envelope's ``param``."""

from __future__ import annotations

import json
from typing import Any

import pytest

from plaudit_wire.names import ID_PATTERN
from plaudit_wire.unicode_check import find_surrogates
from services.core.web.envelope import format_loc
from services.core.web.openapi_errors import document_errors
from services.core.web.validation_messages import body_message, plain_message


@pytest.mark.parametrize(
    ("loc", "param"),
    [
        (("body", "groups", 0, "scores"), "groups[0].scores"),
        (("query", "limit"), "limit"),
        (("body", "query"), "query"),  # OpenRLHF's body field is called "query"
        (("body", "query", 2), "query[2]"),
        (("body", "spec", "function-after[check()]", "channels"), "spec.channels"),
        (("body",), None),
    ],
)
def test_format_loc(loc: tuple[int | str, ...], param: str | None) -> None:
    assert format_loc(loc) == param


def test_a_header_keeps_its_name() -> None:
    assert format_loc(("header", "Idempotency-Key")) == "Idempotency-Key"


def _json_error(doc: str) -> tuple[list[dict[str, Any]], str]:
    try:
        json.loads(doc)
    except json.JSONDecodeError as exc:
        error = {"type": "json_invalid", "loc": ("body", exc.pos), "ctx": {"error": exc.msg}}
        return [error], doc
    raise AssertionError("valid JSON")


def test_malformed_json_names_line_and_column() -> None:
    errors, doc = _json_error('{"k": 5,\n  "groups": [1,, 2]}')
    message = body_message(errors, doc)
    assert message == "the body is not valid JSON: Expecting value at line 2, column 16"


@pytest.mark.parametrize(
    ("error", "words"),
    [
        ({"type": "missing", "loc": ("body",), "msg": "Field required"}, "body is missing"),
        ({"type": "model_attributes_type", "loc": ("body",), "input": "x"}, "not a string"),
        ({"type": "dict_type", "loc": ("body",), "input": [1]}, "not an array"),
        ({"type": "model_attributes_type", "loc": ("body",), "input": b"k=5"}, "is not JSON"),
    ],
)
def test_problems_with_the_whole_body_in_plain_words(error: dict[str, Any], words: str) -> None:
    assert words in (body_message([error], None) or "")


def test_field_problems_are_left_to_the_field_messages() -> None:
    assert body_message([{"type": "missing", "loc": ("body", "k")}], None) is None


def test_the_id_rule_reads_as_words() -> None:
    error = {"type": "string_pattern_mismatch", "ctx": {"pattern": ID_PATTERN}, "msg": "x"}
    assert "control characters" in plain_message(error)


def test_surrogates_are_found_in_values_and_keys_in_document_order() -> None:
    body = {"a": ["ok", "x\ud800"], "b": {"\udc00k": 1, "c": [{"t": "\ud83d"}]}, "e": "\u00e9"}
    assert find_surrogates(body) == [("a", 1), ("b", "\udc00k"), ("b", "c", 0, "t")]
    assert find_surrogates({"emoji": "\U0001f600", "accents": "déjà"}) == []


def test_every_operation_documents_the_envelope_for_its_errors() -> None:
    schema = {
        "paths": {
            "/x": {
                "get": {"responses": {"200": {}, "422": {"description": "old"}}},
                "post": {"requestBody": {}, "responses": {"200": {}}},
            }
        },
        "components": {"schemas": {"HTTPValidationError": {}, "ValidationError": {}}},
    }
    document_errors(schema)
    get, post = schema["paths"]["/x"]["get"], schema["paths"]["/x"]["post"]
    assert set(get["responses"]) == {"200", "401", "403", "404", "422", "429", "503", "504"}
    assert {"400", "409", "413"} <= set(post["responses"])
    ref = post["responses"]["413"]["content"]["application/json"]["schema"]["$ref"]
    assert ref == "#/components/schemas/ErrorEnvelope"
    assert "HTTPValidationError" not in schema["components"]["schemas"]
    assert "ErrorDetail" in schema["components"]["schemas"]
