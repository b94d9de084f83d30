"""Pairing schemes, scoring rules and order combination (pure logic, hand-checked cases)."""

from __future__ import annotations

import pytest

from judges.backends.base import ChoiceResult, GenerateResult
from services.judge import orders
from services.judge.pairing import ANCHOR, adjacent_pairs, anchor_pairs, round_robin_pairs
from services.judge.scoring import (
    PairOutcome,
    bradley_terry_scores,
    pprgde_scores,
    win_rate_scores,
)


def test_adjacent_pairs() -> None:
    assert adjacent_pairs(4) == [(0, 1), (2, 3)]
    assert adjacent_pairs(5) == [(0, 1), (2, 3), (4, 0)]


def test_round_robin_all_and_budgeted() -> None:
    assert round_robin_pairs(4) == [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    subset = round_robin_pairs(8, budget=5, seed=3)
    assert len(subset) == 5 and len(set(subset)) == 5
    assert {i for p in subset for i in p} == set(range(8)), "every completion is judged"
    assert subset == round_robin_pairs(8, budget=5, seed=3), "the draw is seeded"


def test_anchor_pairs() -> None:
    assert anchor_pairs(3) == [(0, ANCHOR), (1, ANCHOR), (2, ANCHOR)]


def test_pprgde_rule_with_ties_truncation_and_failures() -> None:
    outcomes = [
        PairOutcome(0, 1, 0.9, "a"),
        PairOutcome(2, 3, 0.5, "tie"),
        PairOutcome(4, 5, 0.2, "b"),
        PairOutcome(6, 7, None, None),  # the backend failed on this pair
    ]
    truncated = [False] * 5 + [True] + [False] * 2
    scores = pprgde_scores(outcomes, 8, truncated=truncated)
    assert scores.rewards == [1.0, -1.0, 0.0, 0.0, -1.0, -1.0, None, None]
    assert scores.tie_mask == [False, False, True, True, False, False, False, False]


def test_pprgde_length_discount_among_winners() -> None:
    outcomes = [PairOutcome(0, 1, 0.9, "a"), PairOutcome(2, 3, 0.1, "b")]
    lengths = [10.0, 5.0, 7.0, 40.0]
    scores = pprgde_scores(outcomes, 4, lengths=lengths, length_discount=True)
    assert scores.rewards == [pytest.approx(1.0), -1.0, -1.0, pytest.approx(10 / 40)]


def test_round_robin_pprgde_is_the_mean_over_pairs() -> None:
    outcomes = [
        PairOutcome(0, 1, 0.9, "a"),
        PairOutcome(0, 2, 0.5, "tie"),
        PairOutcome(1, 2, 0.1, "b"),
    ]
    scores = pprgde_scores(outcomes, 3)
    assert scores.rewards == [0.5, -1.0, 0.5]
    assert scores.tie_mask == [False, False, False]


def test_win_rate_counts_ties_as_half() -> None:
    outcomes = [
        PairOutcome(0, 1, 0.9, "a"),
        PairOutcome(0, 2, 0.5, "tie"),
        PairOutcome(1, 2, 0.8, "a"),
    ]
    assert win_rate_scores(outcomes, 3).rewards == [0.75, 0.5, 0.25]


def test_bradley_terry_orders_players_and_stays_finite() -> None:
    outcomes = [
        PairOutcome(0, 1, 1.0, "a"),
        PairOutcome(0, 2, 1.0, "a"),
        PairOutcome(1, 2, 0.8, "a"),
    ]
    rewards = bradley_terry_scores(outcomes, 3).rewards
    assert rewards[0] > rewards[1] > rewards[2]  # type: ignore[operator]
    assert sum(r for r in rewards if r is not None) == pytest.approx(0.0, abs=1e-9)


def test_orders_agreeing_give_a_consistent_winner() -> None:
    ab = orders.from_choice("ab", ChoiceResult.from_logprobs(["A", "B"], [-0.2, -2.0]))
    ba = orders.from_choice("ba", ChoiceResult.from_logprobs(["A", "B"], [-2.0, -0.3]))
    pair = orders.combine((ab, ba), tie_margin=0.0)
    assert pair.consistent is True and pair.winner == "a"
    assert pair.p_a == pytest.approx((ab.p_first + (1 - ba.p_first)) / 2)  # type: ignore[operator]


def test_position_bias_gives_a_tie() -> None:
    ab = orders.from_choice("ab", ChoiceResult.from_logprobs(["A", "B"], [-0.1, -3.0]))
    ba = orders.from_choice("ba", ChoiceResult.from_logprobs(["A", "B"], [-0.1, -3.0]))
    pair = orders.combine((ab, ba), tie_margin=0.0)
    assert pair.consistent is False and pair.winner == "tie"


def test_margin_and_failures() -> None:
    ab = orders.OrderJudgment("ab", 0.55, "ok")
    ba = orders.OrderJudgment("ba", 0.45, "ok")
    assert orders.combine((ab, ba), tie_margin=0.1).winner == "tie"
    assert orders.combine((ab, ba), tie_margin=0.0).winner == "a"
    down = orders.from_choice("ba", ChoiceResult.failed("timeout", "too slow"))
    failed = orders.combine((ab, down), tie_margin=0.0)
    assert failed.winner is None and failed.status == "timeout" and failed.p_a is None


def test_generated_verdicts_and_unparseable_replies() -> None:
    ab = orders.from_generation("ab", GenerateResult("ok", "Response A is clearer. Verdict: A"))
    ba = orders.from_generation("ba", GenerateResult("ok", "I cannot decide."))
    assert ab.p_first == 1.0 and ba.status == "unparseable"
    pair = orders.combine((ab, ba), tie_margin=0.0)
    assert pair.winner == "tie" and pair.status == "unparseable"
