"""Two rubric versions compared field by field and criterion by criterion, by id (pure).

Criterion ids are stable across versions, so a reworded criterion shows as ``changed`` (its
``text`` before and after), not as one removed and one added::

    diff = diff_versions("rb_1", 1, old, 2, new)
    [c.id for c in diff.added], diff.changed[0].changes["text"].after
"""

from __future__ import annotations

from plaudit_wire.rubrics import (
    Criterion,
    CriterionChange,
    FieldChange,
    RubricContent,
    RubricDiff,
)

FIELDS = ("name", "question", "reference_answer", "domain", "source")
CRITERION_FIELDS = ("text", "weight", "kind", "anchor")


def diff_versions(
    rubric_id: str, from_version: int, old: RubricContent, to_version: int, new: RubricContent
) -> RubricDiff:
    """What changed from ``old`` to ``new``."""
    before = {c.id: c for c in old.criteria}
    after = {c.id: c for c in new.criteria}
    changed: list[CriterionChange] = []
    unchanged: list[str] = []
    for cid in (c.id for c in new.criteria if c.id in before):
        changes = _criterion_changes(before[cid], after[cid])
        if changes:
            changed.append(CriterionChange(id=cid, changes=changes))
        else:
            unchanged.append(cid)
    return RubricDiff(
        id=rubric_id,
        from_version=from_version,
        to_version=to_version,
        fields={
            name: FieldChange(before=getattr(old, name), after=getattr(new, name))
            for name in FIELDS
            if getattr(old, name) != getattr(new, name)
        },
        added=[c for c in new.criteria if c.id not in before],
        removed=[c for c in old.criteria if c.id not in after],
        changed=changed,
        unchanged=unchanged,
    )


def _criterion_changes(old: Criterion, new: Criterion) -> dict[str, FieldChange]:
    return {
        name: FieldChange(before=getattr(old, name), after=getattr(new, name))
        for name in CRITERION_FIELDS
        if getattr(old, name) != getattr(new, name)
    }
