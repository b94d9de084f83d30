"""The error answers every route can give, written into the OpenAPI schema (issue 9).

FastAPI documents only 422, with its own ``HTTPValidationError`` body; Plaudit answers every
error with the envelope (:mod:`services.core.web.envelope`), and a route may also answer 401/403
(keys), 404, 409 (Idempotency-Key, version and state conflicts), 413 (body limit), 429
(backpressure), 503 (a model, the database or Redis is down) and 504 (the request deadline).
Routes that take a body may also answer 400 (a body that cannot be read as text).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

_REF = "#/components/schemas/{model}"

#: Status -> what it means, for every operation.
ALWAYS = {
    401: "no API key, or an unknown one (when the server has keys)",
    403: "the key lacks the route's scope, or a server without keys was called from another host",
    404: "not found",
    422: "the request's values are not acceptable: every problem with its location",
    429: "overloaded: retry after Retry-After seconds",
    503: "a model, the database or Redis cannot answer now: retry after Retry-After seconds",
    504: "the request ran past its deadline, or an upstream judge timed out",
}
#: Added for operations that take a body or change state.
WITH_BODY = {
    400: "the body could not be read (not UTF-8 text)",
    409: (
        "an Idempotency-Key in use (or used with another body), a stale expected_version, or "
        "a resource in another state (a memory revision that is no longer held)"
    ),
    413: "the body is larger than the server's limit",
}


class ErrorDetail(BaseModel):
    type: str = Field(description="a stable error type, e.g. invalid_request, not_found")
    message: str = Field(description="what went wrong, in plain words")
    param: str | None = Field(description="the field at fault, e.g. groups[0].scores")
    request_id: str = Field(description="the X-Request-ID of this request")


class ErrorEnvelope(BaseModel):
    """Every error Plaudit answers: ``{"error": {"type", "message", "param", "request_id"}}``."""

    error: ErrorDetail


def document_errors(schema: dict[str, Any]) -> dict[str, Any]:
    """Add the error answers to every operation of ``schema`` (in place; returns it)."""
    definitions = ErrorEnvelope.model_json_schema(ref_template=_REF)
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    components.update(definitions.pop("$defs", {}))
    components["ErrorEnvelope"] = definitions
    components.pop("HTTPValidationError", None)
    components.pop("ValidationError", None)
    for path_item in schema.get("paths", {}).values():
        for method, operation in path_item.items():
            if isinstance(operation, dict) and "responses" in operation:
                _document(operation, method)
    return schema


def _document(operation: dict[str, Any], method: str) -> None:
    statuses = dict(ALWAYS)
    if "requestBody" in operation or method in ("post", "put", "patch"):
        statuses.update(WITH_BODY)
    responses = operation["responses"]
    for status, description in sorted(statuses.items()):
        responses[str(status)] = {
            "description": description,
            "content": {
                "application/json": {"schema": {"$ref": _REF.format(model="ErrorEnvelope")}}
            },
        }
