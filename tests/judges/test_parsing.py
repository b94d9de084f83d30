"""Table-driven tests of the pure verdict and grade parsers."""

from __future__ import annotations

import pytest

from judges.parsing import parse_pairwise_verdict, parse_scale_grade

PAIRWISE_CASES: list[tuple[str, str | None, str | None]] = [
    # (reply, expected winner or None for unparseable, case id)
    ("[[A]]", "A", "bracket"),
    ("[[ b ]]", "B", "bracket, lowercase and spaces"),
    ("A", "A", "bare letter"),
    ("B.", "B", "bare letter with period"),
    ("**B**", "B", "bare bold letter"),
    ("(A)\nBecause it is correct.", "A", "bare first line then prose"),
    ("Response B", "B", "bare 'Response B'"),
    ("Verdict: B", "B", "verdict keyword"),
    ("Answer: A", "A", "answer keyword"),
    ("**Verdict:** **A**", "A", "markdown verdict"),
    ("**Final verdict**: Response B", "B", "markdown keyword, response word"),
    ("The better response is A because it is accurate.", "A", "better response is"),
    ("My answer is B", "B", "answer is"),
    ("Winner: Assistant A.", "A", "winner keyword"),
    ("Response B is clearly better than response A.", "B", "prose"),
    ("I prefer B.", "B", "prefer"),
    (
        "Response A misstates the date while B gets it right and is concise.\nVerdict: [[B]]",
        "B",
        "reasoning then verdict line",
    ),
    (
        "Looking at both, A has a typo. B is shorter.\n\nFinal answer: [[A]]",
        "A",
        "reasoning with letters in prose",
    ),
    (
        'I must output "[[A]]" if A is better or "[[B]]" if B is better.\nVerdict: [[B]]',
        "B",
        "echoed instructions then verdict",
    ),
    (
        "End with a final line that is exactly Verdict: [[A]] if response A is better, or exactly "
        "Verdict: [[B]] if response B is better.\nA is more accurate.\nVerdict: [[A]]",
        "A",
        "echoed template wording then verdict",
    ),
    ("Verdict: [[A]]\nOn reflection, no.\nVerdict: [[B]]", "B", "last verdict wins"),
    ("Verdict: [[A]]\n\nExample: Verdict: [[B]]", "A", "echoed example after the verdict"),
    ("Format: Verdict: [[A]]\nResponse B is better.", "B", "format line is not a verdict"),
    ("The answer is **A**.", "A", "bold letter after keyword"),
    ("Verdict: A or B", None, "only echoed alternatives"),
    ("[[A]] or [[B]]", None, "only echoed bracket alternatives"),
    ("[[A]]/[[B]]", None, "slash alternatives"),
    ("[[tie]]", "tie", "bracket tie"),
    ("Verdict: tie", "tie", "keyword tie"),
    ("It's a tie: both are fine.", "tie", "prose tie"),
    ("[[C]]", None, "wrong letter in brackets"),
    ("Verdict: C", None, "wrong letter after keyword"),
    ("Verdict: [[A]] ... final: [[D]]", None, "last bracketed verdict is a wrong letter"),
    ("", None, "empty"),
    ("   \n\t ", None, "whitespace only"),
    ("I cannot decide which is better.", None, "no verdict"),
    ("Answer: A good response would cite sources.", None, "article 'A' after keyword"),
    (
        "Both responses have merit, and the choice depends on context.",
        None,
        "prose without a letter",
    ),
]


@pytest.mark.parametrize(
    ("reply", "expected", "case"), PAIRWISE_CASES, ids=[c[2] for c in PAIRWISE_CASES]
)
def test_pairwise_verdict(reply: str, expected: str | None, case: str) -> None:
    result = parse_pairwise_verdict(reply)
    if expected is None:
        assert result.status == "unparseable", result
        assert result.winner is None
        assert result.reason
    else:
        assert result.status == "ok", result
        assert result.winner == expected
        assert result.evidence


def test_pairwise_none_reply_is_unparseable() -> None:
    assert parse_pairwise_verdict(None).reason == "empty reply"


def test_pairwise_custom_labels_map_to_first_and_second() -> None:
    assert parse_pairwise_verdict("Verdict: [[Y]]", labels=("X", "Y")).winner == "B"
    assert parse_pairwise_verdict("[[A]]", labels=("X", "Y")).status == "unparseable"


@pytest.mark.parametrize("labels", [("A",), ("A", "A"), ("AB", "C")])
def test_pairwise_bad_labels_raise(labels: tuple[str, ...]) -> None:
    with pytest.raises(ValueError):
        parse_pairwise_verdict("A", labels=labels)


SCALE_CASES: list[tuple[str, int, int | None, str]] = [
    # (reply, high, expected grade or None, case id)
    ("7", 10, 7, "bare number"),
    ("7.", 10, 7, "bare number with period"),
    ("Score: 7", 10, 7, "score keyword"),
    ("**Rating:** 4", 5, 4, "markdown rating"),
    ("Grade: 10", 10, 10, "top of scale"),
    ("Score: 1", 10, 1, "bottom of scale"),
    ("7/10", 10, 7, "fraction"),
    ("I'd give it 8 out of 10.", 10, 8, "out of"),
    ("Rating: [[6]]", 10, 6, "bracketed"),
    ("The response is accurate but terse. Score: 6/10", 10, 6, "prose then score"),
    ("Scores range from 1-10. The answer is good.\nScore: 8", 10, 8, "echoed range then score"),
    ("On a scale from 1 to 10, I rate it: Score: 9", 10, 9, "echoed scale wording"),
    ("Score: 3\nAfter checking again, Score: 4", 10, 4, "last score wins"),
    ("Score: 6\nExample: Score: 9", 10, 6, "echoed example score"),
    ("Score: 11", 10, None, "above range"),
    ("Score: 0", 10, None, "below range"),
    ("Score: -3", 10, None, "negative"),
    ("Score: 7.5", 10, None, "not a whole number"),
    ("4/5", 10, None, "fraction on another scale"),
    ("Score: 1-10", 10, None, "only an echoed range"),
    ("", 10, None, "empty"),
    ("The response is great.", 10, None, "no number"),
    ("It mentions 3 facts and 2 dates.", 10, None, "numbers in prose are not grades"),
]


@pytest.mark.parametrize(
    ("reply", "high", "expected", "case"), SCALE_CASES, ids=[c[3] for c in SCALE_CASES]
)
def test_scale_grade(reply: str, high: int, expected: int | None, case: str) -> None:
    result = parse_scale_grade(reply, high=high)
    if expected is None:
        assert result.status == "unparseable", result
        assert result.grade is None
        assert result.reason
    else:
        assert result.status == "ok", result
        assert result.grade == expected


def test_scale_custom_low_bound() -> None:
    assert parse_scale_grade("Score: 0", low=0, high=4).grade == 0


def test_scale_bad_bounds_raise() -> None:
    with pytest.raises(ValueError):
        parse_scale_grade("5", low=5, high=5)


@pytest.mark.parametrize(
    "reply", ["[[", "]]", "Verdict:", "Score:", "[[A", "\x00", "A" * 10_000, "[[" * 500]
)
def test_parsers_never_raise_on_junk(reply: str) -> None:
    assert parse_pairwise_verdict(reply).status in ("ok", "unparseable")
    assert parse_scale_grade(reply).status in ("ok", "unparseable")
