"""Pure parsers for judge replies: a pairwise verdict or a numeric grade.

An unparseable reply is data, not an error: every function returns a result whose
``status`` is ``"ok"`` or ``"unparseable"`` (with a ``reason``), and never raises for any
text. PPR-GDE counts an unparseable verdict as a tie.

How a reply is read:

1. Candidate verdicts are found by patterns in tiers, strongest first: bracketed
   (``[[A]]``, ``[[7]]``), keyed (``Verdict: B``, ``Answer: Response A``, ``Score: 7``),
   a bare first line (``A``, ``7.``), then prose (``Response B is better``, ``7/10``).
2. Echoed instructions are dropped: a verdict followed by ``or``, ``/``, ``if`` (as in
   ``[[A]] if A is better, [[B]] if ...``), one on a line that opens with ``Example`` or
   ``Format``, and a grade that opens a range (``1-10``, ``1 to 10``) are not answers.
3. The strongest tier that has a candidate decides, and its *last* candidate wins (a
   reply that reasons first puts its final answer last). If that candidate names an
   unknown option (``[[C]]``) or a grade off the scale, the reply is unparseable.

Example::

    >>> parse_pairwise_verdict("B is shorter, but A is right.\\nVerdict: [[A]]").winner
    'A'
    >>> parse_scale_grade("Score: 11", high=10).status
    'unparseable'
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

ParseStatus = Literal["ok", "unparseable"]
Winner = Literal["A", "B", "tie"]

_TIE_WORDS = frozenset({"tie", "draw", "equal", "both", "neither", "same"})
# A verdict followed by one of these is an option in echoed instructions, not an answer.
_ECHO_AFTER = re.compile(r"""^\s*["'`*)\]]*\s*(?:or\b|/|\||if\b|when\b|means\b)""", re.IGNORECASE)
_ECHO_BEFORE = re.compile(
    r"""(?:\bor|/|\||\be\.g\.|\bexample:?|\bformat:?)\s*["'`(*]*\s*$""", re.IGNORECASE
)
# After a keyword: markdown emphasis, "is", a colon, opening quotes or brackets.
_KEY_TAIL = r"""[\s*_]*(?:is\b)?[\s*_]*[:=]?[\s"'*_(\[]*"""
# A verdict on a line that introduces an example is quoted, not given.
_EXAMPLE_LINE = re.compile(
    r"^[\s>*_#-]*(?:for\s+example|for\s+instance|example|e\.g\.|format|such\s+as)\b", re.IGNORECASE
)
_LABEL_END = r"(?=\s*(?:$|[^\w\s]|(?:is|was|wins|because|since|as|for|with|clearly|overall)\b))"

_PAIRWISE_TIERS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("bracket", re.compile(r"\[\[\s*(?P<v>[A-Za-z]+)\s*\]\]")),
    (
        "keyword",
        re.compile(
            r"(?i:\b(?:final\s+verdict|verdict|final\s+answer|answer|winner|decision|choice|"
            r"better\s+response|preferred\s+response|preference)" + _KEY_TAIL + ")"
            r"(?i:(?:response|assistant|output|option|answer)\s+)?"
            r"(?P<v>[A-Z]|(?i:tie|draw))" + _LABEL_END
        ),
    ),
    (
        "bare",
        re.compile(
            r"\A\s*[\"'*(\[]*\s*(?i:(?:response|option)\s+)?(?P<v>[A-Z])\s*[\"'*)\].:]*\s*(?:\n|\Z)"
        ),
    ),
    (
        "prose",
        re.compile(
            r"(?i:\b(?:response|assistant|output|option)\s+)(?P<v>[A-Z])"
            r"(?i:\s+(?:is|was)\s+(?:clearly\s+|slightly\s+|much\s+|far\s+)?(?:the\s+)?"
            r"(?:better|superior|preferred|stronger|more\s+helpful))"
            r"|(?i:\b(?:i\s+)?(?:prefer|choose|pick|select)\s+(?:response\s+|assistant\s+|option\s+)?)"
            r"(?P<v2>[A-Z])\b"
            r"|(?i:\b(?P<tie>it'?s\s+a\s+tie|both\s+(?:responses\s+)?are\s+equally\s+(?:good|bad)))"
        ),
    ),
)

_NUMBER = r"(?P<n>[-+]?\d+(?:[.,]\d+)?)"
_RANGE_AFTER = re.compile(r"^\s*(?:-|\u2013|\u2014|to\b|through\b)\s*\d")  # -, en/em dash
_RANGE_BEFORE = re.compile(r"(?:\bfrom|\bbetween|\bscale\s+of)\s*$", re.IGNORECASE)
_OUT_OF = r"(?:\s*(?:/|(?i:out\s+of))\s*(?P<d>\d+))?"

_SCALE_TIERS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("bracket", re.compile(r"\[\[\s*" + _NUMBER + r"\s*\]\]")),
    (
        "keyword",
        re.compile(
            r"(?i:\b(?:final\s+score|overall\s+score|score|rating|grade|final\s+grade)"
            + _KEY_TAIL
            + ")"
            + _NUMBER
            + _OUT_OF
        ),
    ),
    ("bare", re.compile(r"\A\s*[\"'*(\[]*\s*" + _NUMBER + _OUT_OF + r"\s*[\"'*)\].]*\s*(?:\n|\Z)")),
    ("fraction", re.compile(r"(?<![\w.])" + _NUMBER + r"\s*(?:/|(?i:out\s+of))\s*(?P<d>\d+)\b")),
)


@dataclass(frozen=True, slots=True)
class PairwiseVerdict:
    """A parsed pairwise verdict; ``winner`` is None unless ``status == "ok"``."""

    status: ParseStatus
    winner: Winner | None = None
    evidence: str | None = None
    reason: str | None = None

    @property
    def ok(self) -> bool:
        """True when a verdict was found."""
        return self.status == "ok"


@dataclass(frozen=True, slots=True)
class ScaleGrade:
    """A parsed grade; ``grade`` is None unless ``status == "ok"``."""

    status: ParseStatus
    grade: int | None = None
    evidence: str | None = None
    reason: str | None = None

    @property
    def ok(self) -> bool:
        """True when a grade on the scale was found."""
        return self.status == "ok"


@dataclass(frozen=True, slots=True)
class _Candidate:
    value: str
    evidence: str
    denominator: str | None = None


def parse_pairwise_verdict(text: str | None, labels: Sequence[str] = ("A", "B")) -> PairwiseVerdict:
    """Find which of two responses the judge preferred, or a tie.

    ``labels`` names the two options (first, second) as single uppercase letters.

    >>> parse_pairwise_verdict("Answer: B").winner
    'B'
    >>> parse_pairwise_verdict("[[C]]").status
    'unparseable'
    """
    if len(labels) != 2 or len(set(labels)) != 2 or any(len(x) != 1 for x in labels):
        raise ValueError("labels must be two distinct single letters")
    if not text or not text.strip():
        return PairwiseVerdict("unparseable", reason="empty reply")
    found = _decide(text, _PAIRWISE_TIERS, _pairwise_candidates, _ECHO_BEFORE, _ECHO_AFTER)
    if found is None:
        return PairwiseVerdict("unparseable", reason="no verdict found")
    value = found.value.strip()
    if value.upper() in labels:
        winner: Winner = "A" if value.upper() == labels[0] else "B"
        return PairwiseVerdict("ok", winner=winner, evidence=found.evidence)
    if value.lower() in _TIE_WORDS:
        return PairwiseVerdict("ok", winner="tie", evidence=found.evidence)
    return PairwiseVerdict(
        "unparseable", evidence=found.evidence, reason=f"verdict names unknown option {value!r}"
    )


def parse_scale_grade(text: str | None, low: int = 1, high: int = 10) -> ScaleGrade:
    """Find an integer grade in ``[low, high]``; off-scale or fractional grades are unparseable.

    A fraction counts only when its denominator is ``high`` (``7/10`` on a 1..10 scale).

    >>> parse_scale_grade("Rating: 7/10").grade
    7
    """
    if low >= high:
        raise ValueError("low must be below high")
    if not text or not text.strip():
        return ScaleGrade("unparseable", reason="empty reply")
    found = _decide(text, _SCALE_TIERS, _scale_candidates, _RANGE_BEFORE, _RANGE_AFTER)
    if found is None:
        return ScaleGrade("unparseable", reason="no grade found")
    if found.denominator is not None and int(found.denominator) != high:
        return ScaleGrade(
            "unparseable",
            evidence=found.evidence,
            reason=f"grade is out of {found.denominator}, not {high}",
        )
    value = found.value.replace(",", ".")
    if not re.fullmatch(r"[-+]?\d+", value):
        return ScaleGrade(
            "unparseable", evidence=found.evidence, reason=f"grade {value} is not a whole number"
        )
    grade = int(value)
    if not low <= grade <= high:
        return ScaleGrade(
            "unparseable", evidence=found.evidence, reason=f"grade {grade} is outside {low}..{high}"
        )
    return ScaleGrade("ok", grade=grade, evidence=found.evidence)


def _decide(
    text: str,
    tiers: tuple[tuple[str, re.Pattern[str]], ...],
    extract: Callable[[re.Match[str]], _Candidate],
    echo_before: re.Pattern[str],
    echo_after: re.Pattern[str],
) -> _Candidate | None:
    """The last non-echoed candidate of the strongest tier that has one."""
    for _tier, pattern in tiers:
        kept = [
            extract(match)
            for match in pattern.finditer(text)
            if not _is_echo(text, match, echo_before, echo_after)
        ]
        if kept:
            return kept[-1]
    return None


def _is_echo(
    text: str, match: re.Match[str], before: re.Pattern[str], after: re.Pattern[str]
) -> bool:
    prefix = text[max(0, match.start() - 40) : match.start()]
    line = text[text.rfind("\n", 0, match.start()) + 1 : match.start()]
    return bool(
        after.match(text[match.end() :]) or before.search(prefix) or _EXAMPLE_LINE.match(line)
    )


def _pairwise_candidates(match: re.Match[str]) -> _Candidate:
    groups = match.groupdict()
    value = groups.get("v") or groups.get("v2") or ("tie" if groups.get("tie") else "")
    return _Candidate(value=value, evidence=match.group(0).strip())


def _scale_candidates(match: re.Match[str]) -> _Candidate:
    return _Candidate(
        value=match["n"], evidence=match.group(0).strip(), denominator=match.groupdict().get("d")
    )
