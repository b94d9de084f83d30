"""Validation error locations become the envelope's ``param``."""

from __future__ import annotations

import pytest

from services.core.envelope import format_loc


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
