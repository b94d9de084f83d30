"""Hand-made features of a reply and its context that carry more than length (issue 24).

Length alone wins about 68% of the shared pairs, so a model that sees only an embedding tends to
learn length through it. These features name other things voters react to: the reply's
structure (questions, lists, paragraphs, links), its tone (hedges, politeness, second person,
exclamations, capitals), its readability (Flesch reading ease, word and sentence length,
vocabulary variety), and how it relates to what it answers (word overlap with the last turn,
relative length). Lengths are log-scaled so they do not dominate. Pure functions, no I/O::

    reply_features("Thanks! Have you tried office hours?", ("How do I pass calc?",))
    # one float per name in FEATURE_NAMES
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

_WORD = re.compile(r"[A-Za-z']+")
_SENTENCE_END = re.compile(r"[.!?]+(?:\s|$)")
_LIST_LINE = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)])\s+", re.MULTILINE)
_URL = re.compile(r"https?://|www\.")
_VOWEL_GROUPS = re.compile(r"[aeiouy]+")

#: Hedging words and phrases (softened claims).
HEDGES = frozenset(
    [
        "maybe",
        "perhaps",
        "probably",
        "possibly",
        "might",
        "may",
        "could",
        "seems",
        "seem",
        "likely",
        "unlikely",
        "guess",
        "think",
        "believe",
        "suppose",
        "somewhat",
        "generally",
        "usually",
        "often",
        "sometimes",
    ]
)
#: Politeness and warmth markers.
POLITE = frozenset(
    [
        "thanks",
        "thank",
        "please",
        "sorry",
        "congrats",
        "congratulations",
        "welcome",
        "appreciate",
        "glad",
        "hope",
        "luck",
        "hugs",
        "proud",
    ]
)
SECOND_PERSON = frozenset(["you", "your", "you're", "yours", "yourself"])
FIRST_PERSON = frozenset(["i", "i'm", "i've", "my", "me", "mine", "myself"])

FEATURE_NAMES: tuple[str, ...] = (
    "log_chars",
    "log_words",
    "log_sentences",
    "log_paragraphs",
    "questions",
    "ends_with_question",
    "list_lines",
    "links",
    "exclamations",
    "caps_ratio",
    "hedge_rate",
    "polite_rate",
    "you_rate",
    "i_rate",
    "reading_ease",
    "mean_word_length",
    "mean_sentence_words",
    "type_token_ratio",
    "overlap_last",
    "overlap_first",
    "log_length_ratio",
    "is_reply_to_turn",
)


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def _syllables(word: str) -> int:
    """A rough syllable count (vowel groups, a silent final e); enough for reading ease."""
    groups = len(_VOWEL_GROUPS.findall(word))
    if word.endswith("e") and groups > 1:
        groups -= 1
    return max(1, groups)


def reading_ease(words: Sequence[str], sentences: int) -> float:
    """Flesch reading ease, clipped to [-50, 120] (higher reads more easily).

    >>> round(reading_ease(["the", "cat", "sat"], 1), 1)
    119.2
    """
    if not words:
        return 0.0
    syllables = sum(_syllables(w) for w in words)
    score = 206.835 - 1.015 * len(words) / max(sentences, 1) - 84.6 * syllables / len(words)
    return min(120.0, max(-50.0, score))


def _overlap(words: Sequence[str], other: Sequence[str]) -> float:
    """Share of the reply's distinct words (3+ letters) that also occur in ``other``."""
    mine = {w for w in words if len(w) > 2}
    if not mine:
        return 0.0
    return len(mine & {w for w in other if len(w) > 2}) / len(mine)


def _rate(words: Sequence[str], vocabulary: frozenset[str]) -> float:
    return sum(w in vocabulary for w in words) / max(len(words), 1)


def reply_features(reply: str, context: Sequence[str]) -> list[float]:
    """The :data:`FEATURE_NAMES` of ``reply`` given the context parts (oldest first)."""
    words = _words(reply)
    sentences = max(1, len(_SENTENCE_END.findall(reply)))
    parts = [p for p in context if p.strip()]
    first, last = (parts[0], parts[-1]) if parts else ("", "")
    letters = [c for c in reply if c.isalpha()]
    values = {
        "log_chars": math.log1p(len(reply)),
        "log_words": math.log1p(len(words)),
        "log_sentences": math.log1p(sentences),
        "log_paragraphs": math.log1p(len([p for p in reply.split("\n\n") if p.strip()])),
        "questions": min(reply.count("?"), 5) / 5,
        "ends_with_question": float(reply.rstrip().endswith("?")),
        "list_lines": min(len(_LIST_LINE.findall(reply)), 10) / 10,
        "links": min(len(_URL.findall(reply)), 3) / 3,
        "exclamations": min(reply.count("!"), 5) / 5,
        "caps_ratio": sum(c.isupper() for c in letters) / max(len(letters), 1),
        "hedge_rate": _rate(words, HEDGES),
        "polite_rate": _rate(words, POLITE),
        "you_rate": _rate(words, SECOND_PERSON),
        "i_rate": _rate(words, FIRST_PERSON),
        "reading_ease": reading_ease(words, sentences) / 100,
        "mean_word_length": sum(map(len, words)) / max(len(words), 1) / 10,
        "mean_sentence_words": min(len(words) / sentences, 80) / 40,
        "type_token_ratio": len(set(words)) / max(len(words), 1),
        "overlap_last": _overlap(words, _words(last)),
        "overlap_first": _overlap(words, _words(first)),
        "log_length_ratio": math.log1p(len(reply)) - math.log1p(len(last)),
        "is_reply_to_turn": float(len(parts) > 2),
    }
    return [values[name] for name in FEATURE_NAMES]
