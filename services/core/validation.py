"""Small checks shared by the services' channels."""

from __future__ import annotations

from collections.abc import Sized

from services.core.errors import InvalidInput


def need_two(channel: str, completions: Sized) -> None:
    """A channel that compares completions needs at least two of them."""
    if len(completions) < 2:
        raise InvalidInput(
            f"the {channel} channel compares completions: it needs at least 2",
            param="completions",
        )
