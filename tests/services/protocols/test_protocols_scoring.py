"""Pure parts of the trainer protocols: text splitting, [0, 1] scores, the neutral fill."""

from __future__ import annotations

from typing import Any

import pytest

from plaudit_wire.rewards import ChannelResult, CompletionReward
from plaudit_wire.text import strip_end_markers
from services.judge.channels import JudgePairwiseSpec, JudgeScaleSpec
from services.protocols.scoring import (
    GROUP_TOO_SMALL,
    settle_group,
    split_response,
    unit_score,
    unit_value,
    unscored_group,
)
from tests.channels import resolve

CHATML = "<|im_start|>user\nName a colour.<|im_end|>\n<|im_start|>assistant\n"


@pytest.mark.parametrize(
    ("query", "prompt", "response"),
    [
        (CHATML + "Red.<|im_end|>", CHATML, "Red."),
        (CHATML + "Red.<|im_end|><|endoftext|><|endoftext|>", CHATML, "Red."),
        (CHATML + "Red. \n", CHATML, "Red."),
        (CHATML + "  Red", CHATML, "  Red"),
        ("Q: 2+2?\nA: 4</s>", "Q: 2+2?\nA:", " 4"),
        ("<s>" + CHATML + "Blue", CHATML, "Blue"),
        (CHATML, CHATML, ""),
        (CHATML + "<|im_end|>", CHATML, ""),
        ("plain answer", "", "plain answer"),
        (CHATML + "The tag <|im_end|> inside stays.", CHATML, "The tag <|im_end|> inside stays."),
    ],
)
def test_split_response(query: str, prompt: str, response: str) -> None:
    assert split_response(query, prompt) == response


def test_a_query_without_its_prompt_is_not_split() -> None:
    assert split_response("Name a color. Red", "Name a colour.") is None
    assert split_response("", "Q") is None


def test_strip_end_markers_keeps_the_text_before_them() -> None:
    assert strip_end_markers("ok<|eot_id|>\n<pad><pad>") == "ok"
    assert strip_end_markers("no markers") == "no markers"


def test_unit_values_follow_each_channel_range() -> None:
    assert unit_value(JudgeScaleSpec(k=10), 1.0) == 0.0
    assert unit_value(JudgeScaleSpec(k=10), 10.0) == 1.0
    assert unit_value(JudgePairwiseSpec(), -1.0) == 0.0
    assert unit_value(JudgePairwiseSpec(), 0.0) == 0.5
    assert unit_value(JudgePairwiseSpec(scoring="win_rate"), 0.25) == 0.25
    assert unit_value(JudgePairwiseSpec(scoring="bradley_terry"), 0.0) == 0.5
    assert 0 < unit_value(JudgePairwiseSpec(scoring="bradley_terry"), -3.0) < 0.1
    spec = resolve({"channels": {"diversity": {"scaling": "none"}}})
    assert unit_value(spec.channels["diversity"], 1.7) == 1.0


def test_unit_score_is_the_weighted_mean() -> None:
    spec = resolve(
        {"channels": {"judge_scale": {"k": 5, "weight": 3.0}, "diversity": {"weight": 1.0}}}
    )
    assert unit_score(spec, {"judge_scale": 5.0, "diversity": 0.0}) == pytest.approx(0.75)
    zero = resolve({"channels": {"judge_scale": {"k": 5, "weight": 0}}})
    assert unit_score(zero, {"judge_scale": 3.0}) == pytest.approx(0.5)


def _reward(total: float | None, **channels: tuple[float | None, str]) -> CompletionReward:
    return CompletionReward(
        id="c",
        total=total,
        status="ok" if total is not None else "error",
        channels={
            name: ChannelResult(value=value, status=status, meta={})
            for name, (value, status) in channels.items()
        },
    )


SPEC: dict[str, Any] = {"channels": {"judge_scale": {"k": 5}, "diversity": {"weight": 0.5}}}


def test_a_failed_sample_gets_the_mean_ok_total_and_stays_marked() -> None:
    spec = resolve(SPEC)
    results = [
        _reward(4.5, judge_scale=(4.0, "ok"), diversity=(1.0, "ok")),
        _reward(2.0, judge_scale=(2.0, "ok"), diversity=(0.0, "ok")),
        _reward(None, judge_scale=(None, "error"), diversity=(0.5, "ok")),
    ]
    settled = settle_group(spec, results)
    assert [s.reward for s in settled] == [4.5, 2.0, pytest.approx(3.25)]
    assert [s.failed for s in settled] == [False, False, True]
    assert settled[2].total is None and settled[2].status == "error"
    assert settled[2].channels == {"judge_scale": 3.0, "diversity": 0.5}
    ok_scores = [unit_score(spec, {"judge_scale": 4.0, "diversity": 1.0}), settled[1].score]
    assert settled[0].score == pytest.approx(ok_scores[0])
    assert settled[2].score == pytest.approx(sum(ok_scores) / 2)
    assert all(0 <= s.score <= 1 for s in settled)
    assert {s.group_size for s in settled} == {3} and settled[0].spec_hash == spec.hash


def test_a_group_with_no_ok_sample_falls_back_to_the_midpoints() -> None:
    spec = resolve(SPEC)
    settled = settle_group(
        spec, [_reward(None, judge_scale=(None, "timeout"), diversity=(None, "error"))] * 2
    )
    assert [s.reward for s in settled] == [3.0 + 0.5 * 0.5] * 2
    assert [s.score for s in settled] == [0.5, 0.5]
    assert [s.status for s in settled] == ["error", "error"]


def test_an_unscored_group_is_failed_at_the_midpoint() -> None:
    spec = resolve({"channels": {"judge_pairwise": {"weight": 2.0}}})
    [sample] = unscored_group(spec, 1, GROUP_TOO_SMALL)
    assert sample.failed and sample.status == GROUP_TOO_SMALL
    assert sample.reward == 0.0 and sample.score == 0.5 and sample.group_size == 1
