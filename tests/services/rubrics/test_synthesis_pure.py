"""The pure checks of synthesis (stages 1, 4 and 5's structure), domains and personas, export
rows: each rejection names its reason."""

from __future__ import annotations

import numpy as np
import pytest

from plaudit_wire.synthesis import InstanceOut, SynthesisOptions
from services.rubrics.synthesis import domains, export, stages
from services.rubrics.synthesis.corpus import Document
from services.rubrics.synthesis.generator import Candidate, CriterionDraft
from services.rubrics.synthesis.pipeline import Record, stage_counts
from tests.services.rubrics.synth_docs import DOCS

OPTIONS = SynthesisOptions()
DOC = DOCS[0]["text"]


def candidate(question: str, answer: str, kinds: str = "rrrp") -> Candidate:
    words = ["sunlight", "chloroplasts", "oxygen", "glucose", "forests", "leaf", "light", "cells"]
    criteria = tuple(
        CriterionDraft(f"Mentions {w}", 2, "required" if k == "r" else "pitfall")
        for k, w in zip(kinds, words, strict=False)
    )
    return Candidate(question, answer, criteria)


ANSWER = "Green plants convert sunlight into chemical energy stored in glucose, releasing oxygen."


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("Short text.", "too_short"),
        ("x" * 5000, "too_long"),
        ("Mercury may refer to a planet, an element or a god. " * 5, "boilerplate"),
        ("| 1 | 2 | 3 | 4 | 5 | 6 | 7 | 8 | 9 |\n" * 10, "boilerplate"),
        ("A long sentence without an end about many different words " * 5, "too_little_context"),
    ],
)
def test_stage_1_rejects_with_a_reason(text: str, reason: str) -> None:
    found = stages.reject_document(text, OPTIONS, set())
    assert found is not None and found.startswith(reason), found


def test_stage_1_keeps_prose_and_rejects_repeats() -> None:
    seen: set[str] = set()
    assert stages.reject_document(DOC, OPTIONS, seen) is None
    assert (stages.reject_document("  " + DOC.upper(), OPTIONS, seen) or "").startswith("duplicate")


@pytest.mark.parametrize(
    ("question", "answer", "reason"),
    [
        ("According to the passage, what do plants make?", ANSWER, "not_self_contained"),
        ("What does this article say about leaves?", ANSWER, "not_self_contained"),
        ("Photosynthesis", ANSWER, "not_a_question"),
        ("How do plants get their energy?", "Sunlight.", "answer_too_short"),
        (f"Is it true that {ANSWER}", ANSWER, "leaks_answer"),
        (
            "How do green plants convert sunlight into chemical energy, glucose, oxygen?",
            ANSWER,
            "leaks_answer",
        ),
        ("How do plants get energy?", "Volcanoes erupt lava from magma chambers.", "unfaithful"),
    ],
)
def test_stage_4_rejects_with_a_reason(question: str, answer: str, reason: str) -> None:
    found = stages.reject_instance(candidate(question, answer), DOC, OPTIONS)
    assert found is not None and found.startswith(reason), found


def test_stage_4_keeps_a_self_contained_faithful_instance() -> None:
    good = candidate("How do green plants get the energy they need to grow?", ANSWER)
    assert stages.reject_instance(good, DOC, OPTIONS) is None


@pytest.mark.parametrize(
    ("kinds", "reason"),
    [("rp", "criteria_count"), ("rrrr", "too_few_pitfalls"), ("rppp", "too_many_pitfalls")],
)
def test_stage_5_structure(kinds: str, reason: str) -> None:
    found = stages.reject_rubric_shape(candidate("Q?", ANSWER, kinds), OPTIONS)
    assert found is not None and found.startswith(reason), found
    assert stages.reject_rubric_shape(candidate("Q?", ANSWER, "rrrp"), OPTIONS) is None
    heavy = Candidate(
        "Q?", ANSWER, (*candidate("Q?", ANSWER).criteria[:3], CriterionDraft("x y", 11, "pitfall"))
    )
    assert (stages.reject_rubric_shape(heavy, OPTIONS) or "").startswith("weight_out_of_range")
    assert stages.near_duplicates([[1, 0.2, 0.95], [0.2, 1, 0.1], [0.95, 0.1, 1]], 0.9) == (0, 2)


def test_domains_and_personas_are_deterministic() -> None:
    labels = np.eye(len(domains.DOMAINS), dtype=np.float32)
    docs = np.stack([labels[3], labels[7] * 0.01])
    got = domains.assign(docs, labels, ["a", "b"], seed=1)
    assert got[0].domain == list(domains.DOMAINS)[3] and got[0].persona is not None
    assert got[1].domain is None and (got[1].reason or "").startswith("no_domain")
    assert domains.persona("arts", "a", 1) == domains.persona("arts", "a", 1)


def test_stage_counts_account_for_every_document() -> None:
    records = [Record(Document(str(i), "t"), i) for i in range(5)]
    records[0].reject("filter", "too_short: 1 characters < 200")
    records[1].reject("generate", "invalid_output: not JSON")
    records[2].reject("generate", "backend_error: down")
    counts = {c.stage: c for c in stage_counts(records)}
    assert [counts[s].entered for s in ("filter", "domain", "generate", "instance", "rubric")] == [
        5, 4, 4, 2, 2,
    ]  # fmt: skip
    assert counts["generate"].reasons == {"invalid_output": 1, "backend_error": 1}


def test_export_rows_pin_each_rubric() -> None:
    item = InstanceOut(
        id="ri_1", job_id="j1", status="kept", document_id="d", stage=None, reason=None,
        domain="arts", persona="p", question="Q?", reference_answer="A", rubric_id="rb_1",
        rubric_version=2, candidate={}, created_at="2026-01-01T00:00:00+00:00",
    )  # fmt: skip
    assert export.rows([item], "trl") == [{"prompt": "Q?", "rubric_id": "rb_1@2"}]
    assert export.rows([item], "openrlhf") == [{"prompt": "Q?", "label": "rb_1@2"}]
    [verl] = export.rows([item], "verl")
    assert verl["reward_model"]["ground_truth"] == verl["extra_info"]["rubric_id"] == "rb_1@2"
    assert verl["prompt"] == [{"role": "user", "content": "Q?"}] and verl["ability"] == "arts"
