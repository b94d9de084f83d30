"""Wire types shared by every service (pydantic only: no FastAPI, no torch)."""

from __future__ import annotations

import re
import types
from typing import Annotated, Any, Generic, Literal, TypeVar, Union, get_args, get_origin

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    ValidationInfo,
    field_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from plaudit_wire.limits import Text
from plaudit_wire.names import ID_PATTERN as ID_PATTERN
from plaudit_wire.names import NO_NUL_PATTERN
from plaudit_wire.unicode_check import find_strings, has_nul

#: The largest integer the database's integer columns hold (``step``, versions, offsets).
INT32_MAX = 2**31 - 1
#: Control characters (C0, DEL): never part of an id (a NUL breaks Postgres text columns).
CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f]")


class StrictModel(BaseModel):
    """Request models forbid unknown fields, so a typo in a trainer config fails loudly.

    They are strict as well (issue 9): a boolean is not a number (``[1, true, 5]``), a string
    is not a number or a boolean (``"k": "5"``, ``"swap": "yes"``), and NaN and infinity
    (which Python's JSON parser reads) are not numbers. A JSON integer is a valid float.
    """

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _whole_floats_are_integers(cls, value: Any, info: ValidationInfo) -> Any:
        # JSON Schema's "integer" is any number with a zero fractional part, so 2.0 is one
        # (draft 2020-12, 6.1.1) and a schema-driven client may send it; the server refused it
        # (issue 23, finding 10). Strict mode stays: 2.5, "2" and true are still not integers.
        field = cls.model_fields.get(info.field_name or "")
        return value if field is None else whole_floats_as_int(field.annotation, value)


class StoredModel(StrictModel):
    """A request whose text is stored as sent (rubrics, saved specs, notes, job parameters):
    no NUL characters anywhere in it, since Postgres text and jsonb cannot hold them."""

    @field_validator("*", mode="after")
    @classmethod
    def _no_nul(cls, value: Any) -> Any:
        found = find_strings(value, has_nul, limit=1)
        if found:
            where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in found[0])
            raise ValueError(
                f"text{where and ' at ' + where.lstrip('.')} holds a NUL character (U+0000), "
                "which cannot be stored"
            )
        return value

    @classmethod
    def __get_pydantic_json_schema__(
        cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        # The schema says what the validator above refuses (issue 23: a memory rollback's
        # ``reason`` allowed NUL in the schema and was a 422 on the server).
        schema = handler.resolve_ref_schema(handler(core_schema))
        for field in schema.get("properties", {}).values():
            forbid_nul(field)
        return schema


def forbid_nul(schema: Any) -> None:
    """Give each string (and each object key) of ``schema`` the no-NUL pattern, in place. A
    string with a pattern of its own keeps it (Plaudit's patterns exclude NUL: ids, names).
    ``$ref`` is not followed: a referenced model states its own rule.

        >>> node = {"type": "string"}; forbid_nul(node); node["pattern"] == NO_NUL_PATTERN
        True
    """
    if isinstance(schema, list):
        for item in schema:
            forbid_nul(item)
        return
    if not isinstance(schema, dict):
        return
    if schema.get("type") == "string":
        schema.setdefault("pattern", NO_NUL_PATTERN)
    if schema.get("type") == "object" and isinstance(schema.get("additionalProperties"), dict):
        schema.setdefault("propertyNames", {"type": "string"})
        forbid_nul(schema["propertyNames"])
    for key in ("items", "prefixItems", "anyOf", "oneOf", "allOf", "additionalProperties"):
        if key in schema:
            forbid_nul(schema[key])


def whole_floats_as_int(annotation: Any, value: Any) -> Any:
    """``value`` with each float that has no fractional part made an int where ``annotation``
    wants an int (in ``list[int]``, ``int | None``, ``dict[str, int]``; not where a float fits).

        >>> whole_floats_as_int(list[int] | None, [1.0, 2.5])
        [1, 2.5]
    """
    origin = get_origin(annotation)
    if annotation is int:
        return int(value) if isinstance(value, float) and value.is_integer() else value
    if origin is Annotated:
        return whole_floats_as_int(get_args(annotation)[0], value)
    if origin in (Union, types.UnionType):
        branches = [a for a in get_args(annotation) if a is not type(None)]
        if len(branches) != 1:  # ``int | float`` takes the float as it is
            return value
        return whole_floats_as_int(branches[0], value)
    if origin is list and isinstance(value, list):
        (item,) = get_args(annotation) or (Any,)
        return [whole_floats_as_int(item, v) for v in value]
    if origin is dict and isinstance(value, dict):
        _, item = get_args(annotation) or (Any, Any)
        return {k: whole_floats_as_int(item, v) for k, v in value.items()}
    return value


def exactly_one_of(*fields: str) -> dict[str, Any]:
    """A model's JSON-schema addition saying that exactly one of ``fields`` is given (and not
    null): a ``oneOf`` with one branch per field (issue 23, finding 10). The model checks the
    same rule in a validator.

        >>> exactly_one_of("a", "b")["oneOf"][0]
        {'required': ['a'], 'properties': {'a': {'not': {'type': 'null'}}}}
    """
    return {
        "oneOf": [
            {"required": [name], "properties": {name: {"not": {"type": "null"}}}} for name in fields
        ]
    }


def _no_control_chars(value: str) -> str:
    if CONTROL_CHARS.search(value):
        raise ValueError("an id must not hold control characters (NUL, newline, tab, ...)")
    return value


#: A client-chosen identifier: 1..200 characters, none of them control characters.
Id = Annotated[
    str,
    Field(min_length=1, max_length=200, json_schema_extra={"pattern": ID_PATTERN}),
    AfterValidator(_no_control_chars),
]
#: A non-negative integer that fits the database's integer columns.
Count = Annotated[int, Field(ge=0, le=INT32_MAX)]
#: A random seed (a signed 64-bit integer).
Seed = Annotated[int, Field(ge=-(2**63), le=2**63 - 1)]
#: A prompt template's ``name@version``.
TemplateRef = Annotated[str, Field(min_length=1, max_length=200)]
#: Per completion, why generation stopped (``"length"``: truncated), as trainers report it.
FinishReasons = list[Annotated[str, Field(max_length=50)] | None]


class CompletionItem(StrictModel):
    """One completion: a client id (optional) and its text."""

    id: Id | None = None
    text: Text


def _coerce_completion(value: Any) -> Any:
    return {"text": value} if isinstance(value, str) else value


#: ``completions`` accept plain strings or ``{"id", "text"}`` objects everywhere in Plaudit
#: (the schema says both: issue 23 found it stating objects only).
Completion = Annotated[
    CompletionItem,
    BeforeValidator(_coerce_completion, json_schema_input_type=Text | CompletionItem),
]


def completion_ids(items: list[CompletionItem]) -> list[str]:
    """Client ids, with ``c0, c1, ...`` for completions sent as plain strings."""
    return [item.id if item.id is not None else f"c{i}" for i, item in enumerate(items)]


def _unique_ids(items: list[CompletionItem]) -> list[CompletionItem]:
    seen: dict[str, int] = {}
    for index, cid in enumerate(completion_ids(items)):
        if cid in seen:
            raise ValueError(
                f"completion id {cid!r} is used twice (completions {seen[cid]} and {index}); "
                "ids must be unique within a group"
            )
        seen[cid] = index
    return items


#: A group's completions: their ids (given, or ``c0, c1, ...``) are unique within the group.
Completions = Annotated[list[Completion], AfterValidator(_unique_ids)]


class RunTag(StrictModel):
    """Optional audit fields: when ``run_id`` is set, the scored group is stored for the run."""

    run_id: Id | None = None
    step: Count | None = None


#: The one per-item status vocabulary of every service. ``ok``: a value; ``invalid``: the
#: caller's item cannot be scored (too long for the model, bad text); ``unparseable``: the
#: model's reply had no usable answer; ``invalid_output``: structured output that does not
#: validate; ``error``/``timeout``: the backend failed; ``empty``: the completion has no text
#: (an EOS-only response), which no judge is asked about: it carries the channel's floor
#: value (issue 22: the 135M judge gave empty answers some of a group's highest grades).
#: Only ``ok`` and ``empty`` items carry a value (:data:`VALUED_STATUSES`).
ItemStatus = Literal["ok", "invalid", "unparseable", "invalid_output", "error", "timeout", "empty"]
VALUED_STATUSES: tuple[str, ...] = ("ok", "empty")


class Message(StrictModel):
    """One chat message."""

    role: Literal["system", "user", "assistant"]
    content: Text


Prompt = Annotated[
    Text | list[Message],
    Field(description="the prompt: text, or chat messages [{role, content}]"),
]


class ScoredGroupOut(BaseModel):
    id: str
    run_id: str
    step: int | None
    service: str
    group_id: str | None
    request_hash: str
    result: dict[str, Any]
    created_at: str
    spec_name: str | None = None
    spec_version: int | None = None
    inputs: dict[str, Any] | None = Field(
        default=None,
        description="what was scored (prompt, completions, columns) for the rewards service, "
        "unless the server runs with PLAUDIT_STORE_TEXTS=false",
    )


class ScoredGroupPage(BaseModel):
    run_id: str
    groups: list[ScoredGroupOut]
    next_offset: int | None


T = TypeVar("T")


class Page(BaseModel, Generic[T]):
    """One page of a listing: every list in Plaudit answers this shape."""

    items: list[T]
    limit: int
    offset: int
    total: int
