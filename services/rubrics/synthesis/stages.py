"""The pure checks of synthesis: stage 1 (documents), stage 4 (the instance) and the
structural half of stage 5 (the rubric). Each returns None (pass) or a short reason.

Measures, chosen to be cheap, deterministic and explainable:

- *content words*: lower-cased word tokens of 3+ letters that are not stop words;
- *leak* = share of the reference answer's content words that also appear in the question
  (a question that already states its answer leaks it);
- *support* = share of the answer's content words that appear in the document. Together with
  the MiniLM cosine between answer and document (checked by the pipeline) it is the
  faithfulness test: an answer that brings in words the document does not have, or drifts
  from its topic, is rejected.

Example::

    reject_document("Too short.", options, seen=set())   # 'too_short: 10 characters < 200'
    leak("Why is the sky blue?", "The sky is blue because ...")
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from plaudit_wire.synthesis import SynthesisOptions
from services.rubrics.synthesis.generator import Candidate

_WORD = re.compile(r"[^\W\d_]{3,}", re.UNICODE)
_SENTENCE_END = re.compile(r"[.!?](?:\s|$)")
_STOP_TEXT = """the and for are but not you all any can had her was one our out has him his how its
    may new now old see two way who did get let she too use that with have this will your
    from they been were said each which their there what about would make like into them
    than then these some could other more very when also only such most over after first
    well where many those does much both while because between being under through during
    before should since until within without among upon whom whose why yes"""
STOP_WORDS = frozenset(_STOP_TEXT.split())
#: Phrases of pages that are not prose about one subject (stage 1, boilerplate).
BOILERPLATE = re.compile(
    r"may refer to|disambiguation|all rights reserved|click here|cookie policy|"
    r"subscribe to|sign up for|terms of (?:use|service)|javascript|this page|"
    r"this article is about|page not found",
    re.IGNORECASE,
)
#: A question that leans on a text it does not include (stage 4, self-contained).
DOCUMENT_REFERENCE = re.compile(
    r"\b(?:the|this|that|above|given|following|provided)\s+"
    r"(?:passage|text|article|document|excerpt|paragraph|extract|source|context|reading)s?\b"
    r"|\baccording to the\b|\bmentioned above\b|\bthe author\b",
    re.IGNORECASE,
)


def content_words(text: str) -> set[str]:
    """>>> sorted(content_words("The cat sat on the mat, and the cat slept."))
    ['cat', 'mat', 'sat', 'slept']"""
    return {w for w in (m.casefold() for m in _WORD.findall(text)) if w not in STOP_WORDS}


def share_in(words: set[str], other: set[str]) -> float:
    """The share of ``words`` found in ``other`` (1.0 for no words: nothing to miss)."""
    return len(words & other) / len(words) if words else 1.0


def sentences(text: str) -> int:
    return len(_SENTENCE_END.findall(text.strip()))


def fingerprint(text: str) -> str:
    return " ".join(text.casefold().split())


def reject_document(text: str, options: SynthesisOptions, seen: set[str]) -> str | None:
    """Stage 1: length, boilerplate, too little context, a repeat of an earlier document."""
    size = len(text.strip())
    if size < options.min_chars:
        return f"too_short: {size} characters < {options.min_chars}"
    if size > options.max_chars:
        return f"too_long: {size} characters > {options.max_chars}"
    match = BOILERPLATE.search(text)
    if match is not None:
        return f"boilerplate: {match.group(0)!r}"
    letters = sum(c.isalpha() for c in text)
    if letters < 0.6 * size:
        return f"boilerplate: {letters / size:.0%} letters (tables, lists, markup)"
    count = sentences(text)
    if count < options.min_sentences:
        return f"too_little_context: {count} sentence(s) < {options.min_sentences}"
    if len(content_words(text)) < 15:
        return "too_little_context: under 15 distinct content words"
    key = fingerprint(text)
    if key in seen:
        return "duplicate: the same text as an earlier document"
    seen.add(key)
    return None


def reject_instance(candidate: Candidate, document: str, options: SynthesisOptions) -> str | None:
    """Stage 4 without the model: self-contained, no leak, answer supported by the document
    (the embedding half of faithfulness is checked by the pipeline)."""
    question, answer = candidate.question.strip(), candidate.reference_answer.strip()
    reference = DOCUMENT_REFERENCE.search(question)
    if reference is not None:
        return f"not_self_contained: the question mentions {reference.group(0)!r}"
    if not question.endswith("?") and len(question.split()) < 5:
        return "not_a_question: under 5 words and no question mark"
    if len(answer.split()) < 3:
        return "answer_too_short: under 3 words"
    if fingerprint(answer) in fingerprint(question):
        return "leaks_answer: the question contains the answer"
    answer_words = content_words(answer)
    leaked = share_in(answer_words, content_words(question))
    if leaked > options.max_leak:
        return f"leaks_answer: {leaked:.0%} of the answer's content words are in the question"
    support = share_in(answer_words, content_words(document))
    if support < options.min_support:
        return f"unfaithful: {support:.0%} of the answer's content words are in the document"
    return None


def reject_rubric_shape(candidate: Candidate, options: SynthesisOptions) -> str | None:
    """Stage 5, structure: criteria count, weights, pitfalls, exact repeats."""
    criteria = candidate.criteria
    if not options.min_criteria <= len(criteria) <= options.max_criteria:
        return (
            f"criteria_count: {len(criteria)} outside {options.min_criteria}.."
            f"{options.max_criteria}"
        )
    for index, criterion in enumerate(criteria):
        if not options.min_weight <= criterion.weight <= options.max_weight:
            return (
                f"weight_out_of_range: criteria[{index}] weight {criterion.weight:g} outside "
                f"{options.min_weight:g}..{options.max_weight:g}"
            )
    pitfalls = sum(c.kind == "pitfall" for c in criteria)
    if pitfalls < options.min_pitfalls:
        return f"too_few_pitfalls: {pitfalls} < {options.min_pitfalls}"
    if pitfalls / len(criteria) > options.max_pitfall_share:
        return f"too_many_pitfalls: {pitfalls} of {len(criteria)}"
    if pitfalls == len(criteria):
        return "no_required_criterion"
    texts = [fingerprint(c.text).rstrip(".") for c in criteria]
    if len(set(texts)) < len(texts):
        return "duplicate_criteria: two criteria say the same"
    return None


def near_duplicates(
    similarity: Sequence[Sequence[float]], threshold: float
) -> tuple[int, int] | None:
    """The first pair (i, j), i < j, whose similarity reaches ``threshold``."""
    for i, row in enumerate(similarity):
        for j in range(i + 1, len(row)):
            if row[j] >= threshold:
                return i, j
    return None
