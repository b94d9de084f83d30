"""The exact parts of the memory: statistics, saturation, separation, retrieval under a
budget, edit checks, anchors, undo detection and the oscillation guard (no models)."""

from __future__ import annotations

import math

import pytest

from plaudit_wire.rubrics import Criterion
from services.memory import guard
from services.memory import retrieval as rt
from services.memory import stats as st
from services.memory.operations import (
    EditOperation,
    Limits,
    PastOperation,
    accepted_from_wire,
    apply_operations,
    check_operations,
    find_undo,
)
from services.memory.stamps import Stamps

C = [
    Criterion(id="c1", text="Says the pressure is lower", weight=3, kind="required", anchor=True),
    Criterion(id="c2", text="Mentions the boiling point", weight=1, kind="required", anchor=False),
    Criterion(id="c3", text="Claims the water is colder", weight=2, kind="pitfall", anchor=False),
]
LIMITS = Limits(max_operations=3, max_criteria=5, max_weight=10, near_duplicate=0.9)


def words(a: str, b: str) -> float:
    """A stand-in similarity for the pure checks: Jaccard of lower-cased words."""
    x, y = set(a.lower().split()), set(b.lower().split())
    return len(x & y) / len(x | y) if x | y else 0.0


def group(rewards: list[float | None], verdicts: list[dict[str, float | None]]) -> st.GroupVerdicts:
    return st.GroupVerdicts(rewards, verdicts, [10 * (i + 1) for i in range(len(rewards))])


# --- statistics ---------------------------------------------------------------------------


def test_step_statistics_are_exact() -> None:
    g1 = group([1.0, 0.5], [{"c1": 0.9, "c2": 0.8, "c3": 0.1}, {"c1": 0.7, "c2": 0.2, "c3": 0.3}])
    g2 = group([0.0, None], [{"c1": 0.95, "c2": 0.6, "c3": 0.8}, {"c1": None, "c2": 0.4}])
    stats = st.step_stats(C, [g1, g2], saturation=0.8)
    assert (stats.groups, stats.completions) == (2, 4)
    assert stats.reward_mean == pytest.approx(0.5)
    assert stats.reward_std == pytest.approx(math.sqrt(1 / 6))
    assert stats.pass_rates["c1"] == pytest.approx((0.9 + 0.7 + 0.95) / 3)
    assert stats.pass_rates["c2"] == pytest.approx((0.8 + 0.2 + 0.6 + 0.4) / 4)
    # A pitfall passes when it is avoided: 1 - P(met); c3 is unassessed in the last completion.
    assert stats.pass_rates["c3"] == pytest.approx((0.9 + 0.7 + 0.2) / 3)
    assert stats.saturated == ["c1"]
    # c1: every member passes; c3: both of g1 avoid it (g2 has one assessed member, which
    # says nothing); c2 splits g1 (0.8 vs 0.2).
    assert stats.non_separating == ["c1", "c3"]
    # Rewards against lengths 10, 20, 10 (the None reward is left out).
    assert stats.length_corr == pytest.approx(st.pearson([10, 20, 10], [1.0, 0.5, 0.0]))


def test_a_group_with_one_assessed_member_says_nothing_about_separation() -> None:
    lone = group([1.0, 0.0], [{"c2": 0.9}, {"c2": None}])
    assert st.non_separating(C, [lone]) == []
    split = group([1.0, 0.0], [{"c2": 0.9}, {"c2": 0.1}])
    same = group([1.0, 0.0], [{"c2": 0.9}, {"c2": 0.8}])
    assert st.non_separating(C, [same]) == ["c2"]
    assert st.non_separating(C, [same, split]) == []


def test_saturation_threshold_is_inclusive_and_empty_steps_have_no_mean() -> None:
    g = group([1.0, 1.0], [{"c2": 0.9, "c1": 0.9, "c3": 0.0}, {"c2": 0.9, "c1": 0.9, "c3": 0.0}])
    assert st.step_stats(C, [g], saturation=0.9).saturated == ["c1", "c2", "c3"]
    empty = st.step_stats(C, [], saturation=0.9)
    assert empty.reward_mean is None and empty.pass_rates == {"c1": None, "c2": None, "c3": None}
    assert st.mean_std([]) == (None, None)
    assert st.pearson([1, 1, 1], [1, 2, 3]) is None


def test_hacking_needs_a_saturated_presence_criterion_and_a_rising_length_correlation() -> None:
    assert st.presence_criteria(C) == ["c1", "c2"], "pitfalls are never presence criteria"
    base = st.StepStats(1, 2, 0.5, 0.1, {"c2": 0.95}, ["c2"], [], 0.8)
    assert st.hacking_signal(C, base, [0.1, 0.2], rise=0.3) is not None
    assert st.hacking_signal(C, base, [0.6], rise=0.3) is None, "no rise"
    unsaturated = st.StepStats(1, 2, 0.5, 0.1, {"c2": 0.5}, [], [], 0.8)
    assert st.hacking_signal(C, unsaturated, [0.1], rise=0.3) is None
    assert st.hacking_signal(C, base, [None], rise=0.3) is None, "no baseline yet"


def test_the_summary_names_saturated_and_weak_criteria() -> None:
    g = group([1.0, 0.0], [{"c1": 1.0, "c2": 0.1, "c3": 0.0}, {"c1": 1.0, "c2": 0.0, "c3": 0.0}])
    text = st.summary_text(4, C, st.step_stats(C, [g], saturation=0.9))
    assert text.startswith("Step 4: 2 completions in 1 groups. reward mean 0.500 (std 0.500)")
    assert "saturated: c1" in text and "most failed: c2" in text


# --- retrieval ----------------------------------------------------------------------------


def cand(cid: str, text: str, vec: list[float], step: int = 1) -> rt.Candidate:
    return rt.Candidate(cid, "step_summary", step, text, vec)


def test_retrieval_is_static_first_then_dynamic_within_the_budget() -> None:
    static = [cand("s2", "a" * 40, [1, 0, 0], 2), cand("s1", "b" * 40, [0, 1, 0], 1)]
    pool = [*static, cand("d1", "c" * 30, [0, 0, 1]), cand("d2", "d" * 30, [0.5, 0, 1])]
    dynamic = rt.rank([0, 0, 1], pool, top=4)
    assert [h.record.id for h in dynamic][:2] == ["d1", "d2"]
    chosen = rt.select(static, dynamic, budget=115, dedup=0.99)
    assert [h.record.id for h in chosen.static] == ["s2", "s1"]
    assert [h.record.id for h in chosen.dynamic] == ["d1"]
    assert chosen.used == 110 and chosen.skipped["d2"] == "budget"
    assert chosen.skipped["s1"] == "duplicate", "a static record ranked again is not repeated"


def test_retrieval_drops_near_duplicates() -> None:
    static = [cand("s1", "the same summary", [1, 0])]
    dynamic = [rt.Hit(cand("d1", "the same summary ", [0.5, 0.5]), 0.9)]
    dynamic.append(rt.Hit(cand("d2", "other words", [0.99, 0.01]), 0.8))
    dynamic.append(rt.Hit(cand("d3", "far away", [0, 1]), 0.1))
    chosen = rt.select(static, dynamic, budget=1000, dedup=0.95)
    assert [h.record.id for h in chosen.dynamic] == ["d3"]
    assert chosen.skipped == {"d1": "near_duplicate", "d2": "near_duplicate"}


def test_a_zero_budget_returns_nothing() -> None:
    chosen = rt.select([cand("s", "text", [1.0])], [], budget=0, dedup=0.9)
    assert chosen.static == [] and chosen.used == 0


# --- operations ---------------------------------------------------------------------------


def op(**fields: object) -> EditOperation:
    return EditOperation.model_validate(fields)


def test_anchors_never_change() -> None:
    checked = check_operations(
        C,
        [
            op(op="reword", id="c1", text="Says why the pressure is lower"),
            op(op="remove", id="c1"),
            op(op="reweight", id="c1", weight=5),
        ],
        LIMITS,
        words,
    )
    assert [c.accepted for c in checked] == [False, False, False]
    assert all("anchor" in (c.reason or "") for c in checked)


def test_operations_are_checked_one_by_one() -> None:
    checked = check_operations(
        C,
        [
            op(op="reword", id="c2", text="Gives the boiling point in degrees at that altitude"),
            op(op="reweight", id="c2", weight=2),
            op(op="add", text="Mentions the boiling point", weight=1),
            op(op="add", text="Explains what vapour pressure is"),
        ],
        LIMITS,
        words,
    )
    verdicts = [(c.accepted, c.reason) for c in checked]
    assert verdicts[0] == (True, None)
    assert verdicts[1] == (False, "c2 is already edited in this revision")
    assert verdicts[2] == (True, None), "the old text of c2 is free again after the reword"
    assert verdicts[3] == (False, "over the limit of 3 operations")
    assert checked[0].before == {"text": "Mentions the boiling point", "weight": 1.0}


@pytest.mark.parametrize(
    ("operation", "reason"),
    [
        (op(op="add", text="c4"), "is not a criterion"),
        (op(op="add", text="Too short"), "is not a criterion"),
        (op(op="add", id="c2", text="Names the boiling point clearly"), "existing c2"),
        (op(op="add", text="mentions Mentions the boiling point"), "near-duplicate of c2"),
        (op(op="add", text="States the pressure in pascals", weight=11), "weight must lie"),
        (op(op="reword", id="c9", text="Names the boiling point clearly"), "unknown criterion"),
        (op(op="reword", id="c2", text="mentions the   boiling point."), "the old one"),
        (op(op="reweight", id="c3", weight=2), "unchanged"),
        (op(op="reweight", id="c3", weight=0), "weight must lie"),
    ],
)
def test_bad_operations_are_refused_with_a_reason(operation: EditOperation, reason: str) -> None:
    [checked] = check_operations(C, [operation], LIMITS, words)
    assert not checked.accepted and reason in (checked.reason or "")


def test_the_rubric_keeps_a_required_criterion_and_its_size_limit() -> None:
    only = [C[0].model_copy(update={"anchor": False}), C[2]]
    [removed] = check_operations(only, [op(op="remove", id="c1")], LIMITS, words)
    assert removed.reason == "the rubric needs at least one required criterion"
    full = Limits(max_operations=3, max_criteria=3, max_weight=10, near_duplicate=0.9)
    [add] = check_operations(
        C, [op(op="add", text="Explains what vapour pressure is")], full, words
    )
    assert add.reason == "the rubric would exceed 3 criteria"


def test_applying_keeps_ids_and_leaves_new_criteria_without_one() -> None:
    checked = check_operations(
        C,
        [
            op(op="remove", id="c3"),
            op(op="add", text="Explains what vapour pressure is", weight=2, kind="pitfall"),
            op(op="reweight", id="c2", weight=4),
        ],
        LIMITS,
        words,
    )
    new = apply_operations(C, checked)
    assert [(c.id, c.text, c.weight, c.kind) for c in new] == [
        ("c1", "Says the pressure is lower", 3, "required"),
        ("c2", "Mentions the boiling point", 4, "required"),
        (None, "Explains what vapour pressure is", 2, "pitfall"),
    ]
    assert new[0].anchor is True


def test_a_stored_revision_gives_back_its_accepted_operations() -> None:
    """An admin's approval applies what the guard held: the stored (wire) operations read back
    as the accepted ones, refused ones left out, and apply to the same criteria."""
    checked = check_operations(
        C,
        [
            op(op="reweight", id="c1", weight=5),  # an anchor: refused
            op(op="reword", id="c2", text="Gives the boiling point in degrees"),
            op(op="add", text="Explains what vapour pressure is", weight=2),
        ],
        LIMITS,
        words,
    )
    stored = [
        {**c.wire(), "made_id": "c4"} if c.operation.op == "add" else c.wire() for c in checked
    ]
    again = accepted_from_wire(stored)
    assert again == [c for c in checked if c.accepted]
    assert apply_operations(C, again) == apply_operations(C, [c for c in checked if c.accepted])


# --- undo and the guard -------------------------------------------------------------------


def test_undos_of_recent_edits_are_found() -> None:
    history = [
        PastOperation("rv_1", "add", "c4", "Explains what vapour pressure is", 1.0, {}),
        PastOperation("rv_1", "remove", "c3", "", 0.0, {"text": "Claims the water is colder"}),
        PastOperation(
            "rv_2",
            "reword",
            "c2",
            "Gives the boiling point in degrees",
            0.0,
            {"text": "Mentions the boiling point"},
        ),
        PastOperation("rv_2", "reweight", "c5", "", 3.0, {"weight": 1.0}),
    ]

    def undo(operation: EditOperation) -> str:
        return find_undo(operation, history, words, 0.9) or ""

    assert (
        undo(op(op="remove", id="c4"))
        == "removes c4, which a recent revision added (revision rv_1)"
    )
    assert "re-adds c3" in undo(op(op="add", text="Claims the water is colder"))
    assert "back to its earlier text" in undo(
        op(op="reword", id="c2", text="Mentions the boiling point")
    )
    assert "weight back" in undo(op(op="reweight", id="c5", weight=2))
    assert undo(op(op="reweight", id="c5", weight=4)) == "", "further the same way"
    assert undo(op(op="remove", id="c2")) == ""


def test_the_guard_holds_undos_and_unexplained_flips() -> None:
    before = [{"c2": 0.9, "c3": 0.2}, {"c2": 0.8, "c3": 0.1}, {"c2": 0.1, "c3": 0.9}]
    after = [{"c2": 0.2, "c3": 0.2}, {"c2": 0.3, "c3": 0.1}, {"c2": 0.1, "c3": 0.9}]
    flips = guard.verdict_flips(before, after)
    assert (flips.flipped, flips.compared, flips.criteria) == (2, 6, ["c2"])
    assert guard.hold_reason([], flips, max_flip_rate=0.5) is None
    held = guard.hold_reason([], flips, max_flip_rate=0.3)
    assert held is not None and "flips 2 of 6" in held
    assert guard.verdict_flips(before, after, ignore={"c2"}).flipped == 0
    assert guard.hold_reason(["removes c4"], guard.Flips(0, 0, []), 0.3) == (
        "undoes a recent edit: removes c4"
    )


def test_stamps_report_staleness_only_for_versions_the_memory_made() -> None:
    stamps = Stamps()
    assert stamps.stamp("r", "rb_1", 1, 5)["staleness"] is None
    stamps.made_version("rb_1", 2, "r", 4)
    assert stamps.stamp("r", "rb_1", 2, 7) == {
        "rubric_version": 2,
        "latest_version": 2,
        "evidence_step": 4,
        "staleness": 3,
    }
    assert stamps.stamp("other-run", "rb_1", 2, 7)["staleness"] is None
    assert stamps.stamp("r", "rb_1", 1, 7)["latest_version"] == 2
