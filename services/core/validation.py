"""Small helpers for building sub-requests inside services (pydantic only)."""

from __future__ import annotations

from collections.abc import Sized
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from services.core.errors import InvalidInput

M = TypeVar("M", bound=BaseModel)


def build_request(model: type[M], **fields: Any) -> M:
    """A sub-request; a value it rejects is the caller's mistake (422), never a 500."""
    try:
        return model.model_validate(fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        param = ".".join(str(p) for p in first.get("loc", ())) or None
        raise InvalidInput(f"{param}: {first.get('msg')}", param=param) from None


def need_two(channel: str, completions: Sized) -> None:
    """A channel that compares completions needs at least two of them."""
    if len(completions) < 2:
        raise InvalidInput(
            f"the {channel} channel compares completions: it needs at least 2",
            param="completions",
        )
