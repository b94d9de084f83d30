"""Rubric checks run before anything is stored or judged, and stable criterion ids (pure).

Every problem is an :class:`~services.core.errors.InvalidInput` (422) whose ``param`` names
the field, e.g. ``criteria[2].weight``::

    check_rubric(fields, RubricsSettings(max_criteria=20))
    criteria = assign_ids(fields.criteria, known=set(), next_number=1)  # c1, c2, ...
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from plaudit_wire.rubrics import Criterion, CriterionIn, RubricFields
from services.core.errors import InvalidInput
from services.rubrics.settings import RubricsSettings

_SPACE = re.compile(r"\s+")
_ID = re.compile(r"^c([1-9][0-9]*)$")


def normalized_text(text: str) -> str:
    """A criterion's text for duplicate checks: case-folded, whitespace collapsed, no final dot.

    >>> normalized_text("  Names the   cause. ")
    'names the cause'
    """
    return _SPACE.sub(" ", text).strip().rstrip(".").strip().casefold()


def check_rubric(fields: RubricFields, settings: RubricsSettings, prefix: str = "") -> None:
    """Raise InvalidInput naming the first problem: too many criteria, a weight over the
    limit, an empty or duplicate criterion, a repeated id, or no required criterion."""
    criteria = fields.criteria
    if len(criteria) > settings.max_criteria:
        raise InvalidInput(
            f"{len(criteria)} criteria exceed the limit of {settings.max_criteria}",
            param=f"{prefix}criteria",
        )
    seen_text: dict[str, int] = {}
    seen_ids: dict[str, int] = {}
    for index, criterion in enumerate(criteria):
        where = f"{prefix}criteria[{index}]"
        _check_criterion(criterion, settings, where)
        key = normalized_text(criterion.text)
        if key in seen_text:
            raise InvalidInput(
                f"{where}.text repeats criteria[{seen_text[key]}]", param=f"{where}.text"
            )
        seen_text[key] = index
        if criterion.id is not None:
            if criterion.id in seen_ids:
                raise InvalidInput(
                    f"{where}.id {criterion.id!r} repeats criteria[{seen_ids[criterion.id]}]",
                    param=f"{where}.id",
                )
            seen_ids[criterion.id] = index
    if not any(c.kind == "required" for c in criteria):
        raise InvalidInput(
            "a rubric needs at least one required criterion (rewards are divided by the sum "
            "of required weights)",
            param=f"{prefix}criteria",
        )


def _check_criterion(criterion: CriterionIn, settings: RubricsSettings, where: str) -> None:
    if not criterion.text.strip():
        raise InvalidInput(f"{where}.text is empty", param=f"{where}.text")
    if criterion.weight > settings.max_weight:
        raise InvalidInput(
            f"{where}.weight {criterion.weight:g} exceeds the limit of {settings.max_weight:g}",
            param=f"{where}.weight",
        )


def check_name(name: str | None, param: str = "name") -> None:
    if name is not None and not name.strip():
        raise InvalidInput(f"{param} is empty", param=param)


def id_number(criterion_id: str) -> int:
    """``c12`` -> 12."""
    match = _ID.match(criterion_id)
    if match is None:
        raise ValueError(f"not a criterion id: {criterion_id!r}")
    return int(match[1])


def next_number(ids: Iterable[str], floor: int = 1) -> int:
    """The first id number after every one in ``ids`` (and at least ``floor``)."""
    return max([floor, *(id_number(i) + 1 for i in ids)])


def assign_ids(
    criteria: Sequence[CriterionIn],
    *,
    known: set[str] | None,
    next_id: int,
    prefix: str = "",
) -> tuple[list[Criterion], int]:
    """Criteria with ids, and the next free id number.

    Criteria that carry an id keep it; ``known`` (every id this rubric has used, in any
    version; None on create, where any well-formed id is accepted) must contain it, so a
    client cannot mint an id that a later criterion would get. New criteria get c<next_id>,
    c<next_id + 1>, ...: an id is never reused for a different criterion.
    """
    given = [c.id for c in criteria if c.id is not None]
    if known is not None:
        for index, criterion in enumerate(criteria):
            if criterion.id is not None and criterion.id not in known:
                raise InvalidInput(
                    f"{prefix}criteria[{index}].id {criterion.id!r} is not a criterion of this "
                    "rubric; leave id out for a new criterion",
                    param=f"{prefix}criteria[{index}].id",
                )
    number = next_number(given, next_id)
    out: list[Criterion] = []
    for criterion in criteria:
        cid = criterion.id
        if cid is None:
            cid, number = f"c{number}", number + 1
        out.append(
            Criterion(
                id=cid,
                text=criterion.text.strip(),
                weight=criterion.weight,
                kind=criterion.kind,
                anchor=criterion.anchor,
            )
        )
    return out, number
