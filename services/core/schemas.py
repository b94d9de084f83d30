"""Wire types shared by every service (pydantic only: no FastAPI, no torch)."""

from __future__ import annotations

import re
from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
)

from services.core.limits import Text
from services.core.unicode_check import find_strings, has_nul
from services.core.validation_messages import ID_PATTERN as ID_PATTERN

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


#: ``completions`` accept plain strings or ``{"id", "text"}`` objects everywhere in Plaudit.
Completion = Annotated[CompletionItem, BeforeValidator(_coerce_completion)]


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
