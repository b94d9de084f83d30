"""Rubric generate mode on the real SmolLM2-135M judge: the reply is decoded under the
per-criterion JSON schema, so it parses (issue 19: with no schema sent, the 135M judge's
replies never parsed and every criterion was ``invalid_output``)."""

from __future__ import annotations

from typing import Any

import pytest

from judges.fencing import process_secret
from judges.templates import load_template
from plaudit_wire.rubrics import Criterion
from services.core.cache import MemoryCache
from services.core.models.cached_judge import CachedJudge
from services.core.models.judge_model import JudgeModel
from services.rubrics.judging import Case, RubricJudge
from services.rubrics.verdicts import verdicts_schema

pytestmark = pytest.mark.slow

CRITERIA = [
    Criterion(
        id="c1",
        text="Says that the air pressure is lower at altitude",
        weight=2,
        kind="required",
        anchor=False,
    ),
    Criterion(
        id="c2", text="Claims that the water is colder", weight=1, kind="pitfall", anchor=False
    ),
]


async def test_generate_mode_replies_parse_on_the_real_judge(judge_backend: Any) -> None:
    model = JudgeModel(CachedJudge(judge_backend, MemoryCache()), process_secret())
    judge = RubricJudge(model, max_new_tokens=96)
    case = Case("Why does water boil at a lower temperature on a mountain?", None, CRITERIA)
    template = load_template("rubric_generate@2")
    texts = ["The air pressure is lower up high, so water boils sooner.", "Because it is cold."]
    rows = await judge.generate(template, case, texts)
    for row in rows:
        assert [j.status for j in row] == ["ok", "ok"], [j.error for j in row]
        assert all(j.p in (0.0, 1.0) for j in row)


def test_the_schema_asks_for_one_verdict_per_criterion() -> None:
    schema = verdicts_schema(["c1", "c2", "c3"], 200)
    verdicts = schema["properties"]["verdicts"]
    assert verdicts["minItems"] == verdicts["maxItems"] == 3
    assert verdicts["items"]["properties"]["id"]["enum"] == ["c1", "c2", "c3"]
    assert verdicts["items"]["properties"]["reason"]["maxLength"] == (200 - 8 - 60) // 3 * 3
