"""The evaluation math on hand-built sets: accuracy with ties, per-bin, Spearman (vs scipy)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

import pytest
from scipy.stats import spearmanr

from services.karma.data import KarmaData, Pair, Reply, load_reddit_karma
from services.karma.evaluation import (
    EvalOptions,
    accuracy_by_ratio,
    baselines,
    evaluate,
    pair_accuracy,
    spearman,
    within_thread_spearman,
)
from services.karma.features import KarmaInput
from tests.shared_data import reason, shared_copy

SHARED_DATA_DIR = shared_copy("reddit_karma", "pairs.jsonl.gz") or Path("missing")


def test_pair_accuracy_counts_a_tie_half() -> None:
    assert pair_accuracy([3, 2, 1, 5], [1, 2, 4, 0]) == pytest.approx((1 + 0.5 + 0 + 1) / 4)


def test_accuracy_per_ratio_bin() -> None:
    preferred = [1.0, 1.0, 0.0, 1.0, 0.0, 2.0]
    other = [0.0, 2.0, 1.0, 0.0, 1.0, 2.0]
    ratios = [2.0, 2.9, 3.0, 9.99, 10.0, None]
    bins = accuracy_by_ratio(preferred, other, ratios)
    assert [(b["bin"], b["pairs"], b["accuracy"]) for b in bins] == [
        ("[2, 3)", 2, 0.5),
        ("[3, 5)", 1, 0.0),
        ("[5, 10)", 1, 1.0),
        (">= 10", 1, 0.0),
    ]


@pytest.mark.parametrize("seed", range(5))
def test_spearman_matches_scipy_with_ties(seed: int) -> None:
    rng = random.Random(seed)
    x = [rng.choice([0.0, 1.0, 2.0, 2.5]) for _ in range(30)]
    y = [rng.randint(-3, 40) for _ in range(30)]
    assert spearman(x, y) == pytest.approx(spearmanr(x, y).statistic)


def test_spearman_is_undefined_for_a_constant_side() -> None:
    assert spearman([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]) is None
    assert spearman([1.0], [2.0]) is None


def test_within_thread_spearman_averages_threads_and_skips_constant_ones() -> None:
    groups = [([1.0, 2.0, 3.0], [10.0, 20.0, 30.0]), ([3.0, 2.0, 1.0], [1.0, 5.0, 9.0])]
    groups.append(([1.0, 2.0], [4.0, 4.0]))
    result = within_thread_spearman(groups)
    assert result == {"mean": 0.0, "threads": 2, "replies": 6, "skipped_threads": 1}


def _reply(rid: str, thread: str, text: str, score: float, age: str = "1h") -> Reply:
    return Reply(rid, thread, thread, ("a question",), text, score, "test", {"age": age})


class LengthScorer:
    """Scores by reply length; records whether it was asked to hide order."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, bool]] = []

    def score_inputs(self, inputs: Sequence[KarmaInput], *, order_blind: bool) -> list[float]:
        self.calls.append((len(inputs), order_blind))
        return [float(len(i.reply)) for i in inputs]


def _tiny_set() -> KarmaData:
    replies = [
        _reply("a1", "a", "a long and careful answer", 30),
        _reply("a2", "a", "short", 3),
        _reply("a3", "a", "medium one", 1),
        _reply("b1", "b", "ok", 20),
        _reply("b2", "b", "a much longer reply", 2),
        _reply("b3", "b", "x", 1),
    ]
    by_id = {r.id: r for r in replies}
    pairs = [Pair(by_id["a1"], by_id["a2"]), Pair(by_id["a2"], by_id["a3"])]
    pairs += [Pair(by_id["b1"], by_id["b2"]), Pair(by_id["b1"], by_id["b3"])]
    return KarmaData(replies, pairs, "tiny")


def test_evaluate_scores_pairs_order_blind_and_threads_with_metadata() -> None:
    data = _tiny_set()
    scorer = LengthScorer()
    result = evaluate(scorer, data, EvalOptions(min_thread_replies=2, chunk=4))
    # The pair replies are scored once each, order-blind; the thread replies with every field.
    assert scorer.calls == [(4, True), (2, True), (4, False), (2, False)]
    # a1>a2 right, a2<a3 wrong, b1<b2 wrong, b1>b3 right.
    assert result["pair_accuracy"] == 0.5 and result["pairs"] == 4
    expected = [spearmanr([25, 5, 10], [30, 3, 1]).statistic]
    expected.append(spearmanr([2, 19, 1], [20, 2, 1]).statistic)
    assert result["spearman"]["mean"] == pytest.approx(sum(expected) / 2)
    # A length scorer is the length baseline.
    length = result["baselines"]["length"]
    assert length["pair_accuracy"] == result["pair_accuracy"]
    assert length["spearman"]["mean"] == pytest.approx(result["spearman"]["mean"])
    assert result["baselines"]["random"]["pair_accuracy"] == 0.5


def test_length_baseline_is_computed_from_the_texts() -> None:
    data = _tiny_set()
    result = baselines(data.pairs, [])
    assert result["length"]["pair_accuracy"] == 0.5
    assert result["length"]["spearman"]["threads"] == 0


@pytest.mark.slow
@pytest.mark.skipif(not SHARED_DATA_DIR.is_dir(), reason=reason("reddit_karma"))
def test_shared_test_pairs_length_baseline_matches_the_readme() -> None:
    data = load_reddit_karma(SHARED_DATA_DIR)
    assert (len(data.replies), len(data.pairs)) == (350_280, 51_812)
    test = data.split("test")
    length = baselines(test.pairs, [])["length"]
    strict = length["pair_accuracy"] - 0.5 * length["ties"] / length["pairs"]
    assert length["pairs"] == 5280
    assert round(100 * strict, 1) == 68.2  # the README counts a tie as a loss
