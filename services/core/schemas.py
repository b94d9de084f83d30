"""Wire types shared by every service (pydantic only: no FastAPI, no torch)."""

from __future__ import annotations

from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from services.core.limits import Text


class StrictModel(BaseModel):
    """Request models forbid unknown fields, so a typo in a trainer config fails loudly."""

    model_config = ConfigDict(extra="forbid")


class CompletionItem(StrictModel):
    """One completion: a client id (optional) and its text."""

    id: str | None = Field(default=None, max_length=200)
    text: Text


def _coerce_completion(value: Any) -> Any:
    return {"text": value} if isinstance(value, str) else value


#: ``completions`` accept plain strings or ``{"id", "text"}`` objects everywhere in Plaudit.
Completion = Annotated[CompletionItem, BeforeValidator(_coerce_completion)]


def completion_ids(items: list[CompletionItem]) -> list[str]:
    """Client ids, with ``c0, c1, ...`` for completions sent as plain strings."""
    return [item.id if item.id is not None else f"c{i}" for i, item in enumerate(items)]


class RunTag(StrictModel):
    """Optional audit fields: when ``run_id`` is set, the scored group is stored for the run."""

    run_id: str | None = Field(default=None, max_length=200)
    step: int | None = Field(default=None, ge=0)


#: The one per-item status vocabulary of every service. ``ok``: a value; ``invalid``: the
#: caller's item cannot be scored (too long for the model, bad text); ``unparseable``: the
#: model's reply had no usable answer; ``invalid_output``: structured output that does not
#: validate; ``error``/``timeout``: the backend failed. Only ``ok`` items carry a value.
ItemStatus = Literal["ok", "invalid", "unparseable", "invalid_output", "error", "timeout"]


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
