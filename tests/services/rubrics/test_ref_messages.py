"""Messages for a wrong rubric reference (issue 21): a mistyped id is told the id's form, not a
regex; an existing rubric's missing version says which versions there are."""

from __future__ import annotations

import httpx

from tests.conftest import assert_envelope
from tests.services.rubrics.conftest import BOIL, create

COMPLETIONS = ["The air pressure is lower, so it boils sooner.", "It is colder."]


async def _score(api: httpx.AsyncClient, ref: str) -> httpx.Response:
    body = {"rubric_id": ref, "prompt": BOIL["question"], "completions": COMPLETIONS}
    return await api.post("/v1/rubrics/score", json=body)


async def test_a_mistyped_rubric_id_is_told_the_form_of_an_id(api: httpx.AsyncClient) -> None:
    error = assert_envelope(await _score(api, "rb-3f2a"), 422, "rubric_id")
    assert "^rb_" not in error["message"] and "[0-9a-f]" not in error["message"]
    assert "rb_3f2a@2" in error["message"] and "'rb-3f2a'" in error["message"]


async def test_a_missing_version_is_named_as_such(api: httpx.AsyncClient) -> None:
    rubric = await create(api)
    error = assert_envelope(await _score(api, f"{rubric['id']}@9"), 422, "rubric_id")
    assert error["message"] == f"rubric {rubric['id']} has no version 9 (versions 1 to 1)"
    error = assert_envelope(await _score(api, "rb_0123abcd"), 422, "rubric_id")
    assert "unknown rubric 'rb_0123abcd'" in error["message"]
