"""The ``rubric`` reward channel through /v1/rewards/group (scripted judge): the rubric from
the spec or per row from the ``rubric_id`` column, values equal to /v1/rubrics/score, and
pass rates in the channel's meta for trainer logs."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.conftest import assert_envelope
from tests.services.rubrics.conftest import BOIL, create

COMPLETIONS = ["The air pressure is lower, so it boils sooner with altitude.", "It is colder."]


async def _group(api: httpx.AsyncClient, **body: Any) -> dict[str, Any]:
    response = await api.post(
        "/v1/rewards/group", json={"prompt": BOIL["question"], "completions": COMPLETIONS, **body}
    )
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()
    return data


async def _direct(api: httpx.AsyncClient, ref: str) -> list[float]:
    body = {"rubric_id": ref, "prompt": BOIL["question"], "completions": COMPLETIONS}
    return [r["reward"] for r in (await api.post("/v1/rubrics/score", json=body)).json()["results"]]


async def test_the_channel_scores_with_the_spec_rubric(api: httpx.AsyncClient) -> None:
    rubric = await create(api)
    spec = {"channels": {"rubric": {"rubric_id": rubric["id"], "weight": 2.0}}}
    data = await _group(api, spec=spec)
    direct = await _direct(api, rubric["id"])
    for result, reward in zip(data["results"], direct, strict=True):
        channel = result["channels"]["rubric"]
        assert channel["status"] == "ok" and channel["value"] == pytest.approx(reward)
        assert result["total"] == pytest.approx(2.0 * reward)
    first = data["results"][0]["channels"]["rubric"]
    assert first["meta"]["rubric"] == {"id": rubric["id"], "version": 1, "name": "boil"}
    assert first["meta"]["judge"]["template"] == "rubric_criterion@2"
    assert first["detail"]["criteria"] == pytest.approx({"c1": 0.9, "c2": 0.9, "c3": 0.1})
    metrics = first["meta"]["metrics"]
    assert metrics["pass_rate/c1"] == pytest.approx(first["meta"]["pass_rates"]["c1"])
    assert metrics["pass_rate/pitfall"] == pytest.approx(first["meta"]["pass_rates"]["c3"])
    assert "pass_rate/required" in metrics


async def test_a_rows_column_names_its_rubric(api: httpx.AsyncClient) -> None:
    first = await create(api)
    second = await create(api, {**BOIL, "name": "second", "criteria": [{"text": "Says colder"}]})
    spec = {"channels": {"rubric": {"rubric_id": first["id"]}}}
    data = await _group(api, spec=spec, columns={"rubric_id": f"{second['id']}@1"})
    meta = data["results"][0]["channels"]["rubric"]["meta"]
    assert meta["rubric"]["id"] == second["id"], "the row's column wins over the spec"
    assert [r["channels"]["rubric"]["value"] for r in data["results"]] == pytest.approx(
        await _direct(api, second["id"])
    )
    assert set(meta["metrics"]) == {"pass_rate/required"}, "no per-criterion metrics per row"
    bare = await _group(api, spec={"channels": {"rubric": {}}}, columns={"rubric_id": first["id"]})
    assert bare["results"][0]["channels"]["rubric"]["meta"]["rubric"]["id"] == first["id"]


async def test_channel_errors_name_their_field(api: httpx.AsyncClient) -> None:
    base = {"prompt": "Q?", "completions": COMPLETIONS}
    nothing = await api.post(
        "/v1/rewards/group", json={**base, "spec": {"channels": {"rubric": {}}}}
    )
    assert_envelope(nothing, 422, "columns.rubric_id")
    unknown_row = {**base, "spec": {"channels": {"rubric": {}}}, "columns": {"rubric_id": "rb_00"}}
    assert_envelope(await api.post("/v1/rewards/group", json=unknown_row), 422, "columns.rubric_id")
    unknown = {**base, "spec": {"channels": {"rubric": {"rubric_id": "rb_00"}}}}
    assert_envelope(
        await api.post("/v1/rewards/group", json=unknown), 422, "spec.channels.rubric.rubric_id"
    )
    dup = {"criteria": [{"text": "a"}, {"text": "A"}]}
    inline = {**base, "spec": {"channels": {"rubric": {"rubric": dup}}}}
    assert_envelope(
        await api.post("/v1/rewards/group", json=inline),
        422,
        "spec.channels.rubric.rubric.criteria[1].text",
    )
    verdict = await api.post(
        "/v1/rewards/validate", json={"spec": {"channels": {"rubric": {"template": "scale@1"}}}}
    )
    assert verdict.json()["errors"][0]["param"] == "spec.channels.rubric.template"


async def test_the_channel_is_listed_and_pins_its_template(api: httpx.AsyncClient) -> None:
    channels = (await api.get("/v1/rewards/channels")).json()
    assert "rubric" in channels
    assert channels["rubric"]["needs_group"] is False
    verdict = (
        await api.post(
            "/v1/rewards/validate",
            json={"spec": {"channels": {"rubric": {"mode": "implicit", "show_reference": True}}}},
        )
    ).json()
    assert verdict["valid"] is True
    assert verdict["spec"]["channels"]["rubric"]["template"] == "rubric_implicit_reference@2"
