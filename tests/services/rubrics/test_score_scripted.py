"""POST /v1/rubrics/score with the scripted judge: the reward arithmetic, statuses, modes, and
how rows reach the backend (one call per completion, criteria last). Plumbing only: the real
SmolLM2 runs in test_score_real.py. The scripted judge says a criterion is met (P = 0.9) when
its last word is in the response, else P = 0.1."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

from judges.backends.base import ChoiceRequest
from tests.conftest import assert_envelope
from tests.services.rubrics.conftest import BOIL, create
from tests.services.rubrics.scripted import RubricScriptedBackend

#: c1 "... pressure is lower" (3), c2 "... drop with altitude" (1), pitfall c3 "... colder" (2)
BOTH = "The air pressure is lower, so the boiling point falls with altitude."
ONE = "The air pressure is lower up there."
PITFALL = "The water is colder."


def expected(ps: list[float], weights: tuple[float, ...] = (3, 1, 2)) -> float:
    return (weights[0] * ps[0] + weights[1] * ps[1] - weights[2] * ps[2]) / (
        weights[0] + weights[1]
    )


async def _score(api: httpx.AsyncClient, status: int = 200, **body: Any) -> dict[str, Any]:
    response = await api.post("/v1/rubrics/score", json=body)
    assert response.status_code == status, response.text
    data: dict[str, Any] = response.json()
    return data


async def test_logprob_rewards_are_the_signed_normalised_sum(api: httpx.AsyncClient) -> None:
    rubric = await create(api)
    data = await _score(
        api,
        rubric_id=rubric["id"],
        prompt=BOIL["question"],
        completions=[BOTH, {"id": "mine", "text": ONE}, PITFALL],
    )
    assert data["kind"] == "rewards" and data["mode"] == "logprob"
    assert data["rubric"] == {"id": rubric["id"], "version": 1, "name": "boil"}
    assert data["judge"]["template"] == "rubric_criterion@2"
    assert data["judge"]["model"] == "scripted-rubric-judge"
    assert [r["id"] for r in data["results"]] == ["c0", "mine", "c2"]
    wanted = [[0.9, 0.9, 0.1], [0.9, 0.1, 0.1], [0.1, 0.1, 0.9]]
    for result, ps in zip(data["results"], wanted, strict=True):
        assert result["status"] == "ok"
        assert [c["p"] for c in result["criteria"]] == pytest.approx(ps)
        assert [c["id"] for c in result["criteria"]] == ["c1", "c2", "c3"]
        assert [c["weight"] for c in result["criteria"]] == [3, 1, 2]
        assert [c["kind"] for c in result["criteria"]] == ["required", "required", "pitfall"]
        assert all(c["status"] == "ok" and c["coverage"] > 0.99 for c in result["criteria"])
        assert result["reward"] == pytest.approx(expected(ps))
    assert data["results"][2]["reward"] < 0, "pitfalls can take a reward below 0"
    # pass rates: required met, pitfall avoided, averaged over the group
    assert data["pass_rates"]["c1"] == pytest.approx((0.9 + 0.9 + 0.1) / 3)
    assert data["pass_rates"]["c3"] == pytest.approx((0.9 + 0.9 + 0.1) / 3)


async def test_each_completion_is_one_backend_call_with_the_criterion_last(
    api: httpx.AsyncClient, scripted: RubricScriptedBackend
) -> None:
    rubric = await create(api)
    scripted.calls.clear()
    await _score(api, rubric_id=rubric["id"], prompt="Q?", completions=[BOTH, ONE], cache=False)
    calls = [c for c in scripted.calls if isinstance(c[0], ChoiceRequest)]
    assert [len(c) for c in calls] == [3, 3]
    for call, completion in zip(calls, (BOTH, ONE), strict=True):
        texts = [r.messages[-1]["content"] for r in call]
        heads = {t[: t.rindex("\nCriterion: ")] for t in texts}
        assert len(heads) == 1 and completion in heads.pop(), "a completion's rows share its head"
        assert [t[t.rindex("\nCriterion: ") :] for t in texts] == [
            f"\nCriterion: {c['text']}" for c in BOIL["criteria"]
        ]


async def test_id_at_version_inline_and_the_prompt_default(
    api: httpx.AsyncClient, scripted: RubricScriptedBackend
) -> None:
    v1 = await create(api)
    body = {k: v1[k] for k in ("name", "question", "domain", "source", "criteria")}
    body["criteria"] = [{**v1["criteria"][0], "weight": 1}]
    await api.put(f"/v1/rubrics/{v1['id']}", json=body)
    pinned = await _score(api, rubric_id=f"{v1['id']}@1", completions=[ONE])
    current = await _score(api, rubric_id=v1["id"], completions=[ONE])
    assert pinned["rubric"]["version"] == 1 and len(pinned["results"][0]["criteria"]) == 3
    assert current["rubric"]["version"] == 2 and current["results"][0]["reward"] == pytest.approx(
        0.9
    )
    question = scripted.calls[-1][0].messages[-1]["content"]  # type: ignore[union-attr]
    assert BOIL["question"] in question, "without a prompt the rubric's question is asked"
    inline = await _score(
        api, rubric={"criteria": BOIL["criteria"]}, prompt="Q?", completions=[BOTH]
    )
    assert inline["rubric"] == {"id": None, "version": None, "name": None}
    assert inline["results"][0]["reward"] == pytest.approx(expected([0.9, 0.9, 0.1]))


async def test_a_criterion_the_judge_could_not_assess_nulls_that_reward(
    api: httpx.AsyncClient, scripted: RubricScriptedBackend
) -> None:
    rubric = await create(api)
    data = await _score(
        api, rubric_id=rubric["id"], prompt="Q?", completions=[BOTH, "FAIL here", "TOOLONG x"]
    )
    ok, failed, invalid = data["results"]
    assert ok["status"] == "ok" and ok["reward"] is not None
    assert failed["reward"] is None and failed["status"] == "error" and failed["error"]
    assert {c["status"] for c in failed["criteria"]} == {"error"}
    assert all(c["p"] is None for c in failed["criteria"])
    assert invalid["reward"] is None and invalid["status"] == "invalid"
    assert data["pass_rates"]["c1"] == pytest.approx(0.9), "only assessed completions count"
    # every item too long for the judge: the caller's data, 200 with statuses
    data = await _score(api, rubric_id=rubric["id"], prompt="Q?", completions=["TOOLONG"])
    assert data["results"][0]["status"] == "invalid"
    scripted.down = True
    down = await api.post(
        "/v1/rubrics/score", json={"rubric_id": rubric["id"], "prompt": "Z?", "completions": ["a"]}
    )
    assert_envelope(down, 503)
    assert down.headers["retry-after"]


async def test_normalize_none_and_focal_weights(api: httpx.AsyncClient) -> None:
    rubric = await create(api)
    base = {"rubric_id": rubric["id"], "prompt": "Q?", "completions": [ONE]}
    raw = await _score(api, **base, normalize="none")
    assert raw["results"][0]["reward"] == pytest.approx(3 * 0.9 + 0.1 - 2 * 0.1)
    rates = {"c1": 1.0, "c2": 0.0}
    focal = await _score(api, **base, aggregation="focal", pass_rates=rates)
    weights = [c["weight"] for c in focal["results"][0]["criteria"]]
    assert weights == pytest.approx([0.3, 1.0, 2.0]), "saturated c1 drops to the floor"
    assert focal["results"][0]["reward"] == pytest.approx(
        expected([0.9, 0.1, 0.1], (0.3, 1.0, 2.0))
    )
    no_rates = await api.post("/v1/rubrics/score", json={**base, "aggregation": "focal"})
    assert_envelope(no_rates, 422)
    unknown = {**base, "aggregation": "focal", "pass_rates": {"c7": 0.5}}
    assert_envelope(await api.post("/v1/rubrics/score", json=unknown), 422, "pass_rates")


async def test_show_reference_uses_the_reference_template(
    api: httpx.AsyncClient, scripted: RubricScriptedBackend
) -> None:
    rubric = await create(api)
    data = await _score(
        api, rubric_id=rubric["id"], prompt="Q?", completions=[ONE], show_reference=True
    )
    assert data["judge"]["template"] == "rubric_criterion_reference@2"
    prompt = scripted.calls[-1][0].messages[-1]["content"]  # type: ignore[union-attr]
    reference = re.escape(BOIL["reference_answer"])
    fence = r"reference_answer [0-9a-f]{16}>>"
    assert re.search(rf"<<{fence}\n{reference}\n<</{fence}", prompt)
    bare = await create(api, {**BOIL, "reference_answer": None})
    missing = {
        "rubric_id": bare["id"],
        "prompt": "Q?",
        "completions": [ONE],
        "show_reference": True,
    }
    assert_envelope(await api.post("/v1/rubrics/score", json=missing), 422, "show_reference")
    wrong = {"rubric_id": rubric["id"], "completions": [ONE], "template": "scale@1"}
    assert_envelope(await api.post("/v1/rubrics/score", json=wrong), 422, "template")


async def test_generate_mode_reads_strict_json_verdicts(api: httpx.AsyncClient) -> None:
    rubric = await create(api)
    data = await _score(
        api,
        rubric_id=rubric["id"],
        prompt="Q?",
        mode="generate",
        completions=[BOTH, "PROSE", "PARTIAL: the air pressure is lower"],
    )
    assert data["judge"]["template"] == "rubric_generate@2"
    good, prose, partial = data["results"]
    assert [c["p"] for c in good["criteria"]] == [1.0, 1.0, 0.0]
    assert good["reward"] == pytest.approx(1.0) and good["criteria"][0]["reason"] == "scripted"
    assert prose["reward"] is None and prose["status"] == "invalid_output"
    assert "not JSON" in prose["error"]
    assert [c["status"] for c in partial["criteria"]] == ["ok", "ok", "invalid_output"]
    assert partial["reward"] is None and partial["status"] == "invalid_output"


async def test_implicit_mode_grades_against_the_whole_rubric(api: httpx.AsyncClient) -> None:
    rubric = await create(api)
    body = {"rubric_id": rubric["id"], "prompt": "Q?", "mode": "implicit"}
    data = await _score(api, **body, completions=["GOOD answer", "meh"])
    assert data["judge"]["template"] == "rubric_implicit@2"
    good, meh = data["results"]
    assert good["distribution"] is not None and len(good["distribution"]) == 10
    assert sum(good["distribution"]) == pytest.approx(1.0)
    assert good["grade"] > meh["grade"]
    assert good["reward"] == pytest.approx((good["grade"] - 1) / 9)
    assert good["criteria"] == [] and data["pass_rates"] == {"c1": None, "c2": None, "c3": None}
    raw = await _score(api, **body, completions=["GOOD answer"], normalize="none", k=5)
    assert raw["results"][0]["reward"] == pytest.approx(raw["results"][0]["grade"])
    assert len(raw["results"][0]["distribution"]) == 5


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"completions": ["a"]}, None),
        (
            {"completions": ["a"], "rubric_id": "rb_ab", "rubric": {"criteria": [{"text": "x"}]}},
            None,
        ),
        ({"completions": ["a"], "rubric_id": "rb_0000"}, "rubric_id"),
        ({"completions": ["a"], "rubric_id": "nope"}, "rubric_id"),
        ({"completions": [], "rubric_id": "rb_ab"}, "completions"),
        ({"completions": ["a"] * 33, "rubric": {"criteria": [{"text": "x"}]}}, "completions"),
        (
            {"completions": ["a"], "rubric": {"criteria": [{"text": "x"}, {"text": "X"}]}},
            "rubric.criteria[1].text",
        ),
        ({"completions": ["a"], "rubric": {"criteria": [{"text": "x"}]}}, "prompt"),
        ({"completions": ["a"], "rubric_id": "rb_ab", "mode": "vibes"}, "mode"),
    ],
)
async def test_bad_score_requests_get_a_422(
    api: httpx.AsyncClient, body: dict[str, Any], param: str | None
) -> None:
    response = await api.post("/v1/rubrics/score", json=body)
    error = assert_envelope(response, 422)
    if param is not None:
        assert error["param"] == param


async def test_scored_groups_are_stored_for_their_run(api: httpx.AsyncClient) -> None:
    rubric = await create(api)
    await _score(
        api, rubric_id=rubric["id"], prompt="Q?", completions=[ONE], run_id="rub-run", step=4
    )
    groups = (await api.get("/v1/runs/rub-run/groups", params={"service": "rubrics"})).json()
    assert groups["total"] == 1
    stored = groups["items"][0]
    assert stored["step"] == 4 and stored["result"]["rubric"]["id"] == rubric["id"]
