"""From per-criterion verdicts to a rubric reward (pure functions, no I/O).

The reward of a completion (ARES's R(x, y) = sum_k w_k J(x, y, c_k), signed and normalised
the way OpenAI's HealthBench grader does it)::

    reward = (sum over required of w * P(met) - sum over pitfalls of w * P(violated))
             / sum of required weights

A pitfall's statement describes the mistake, so P(violated) is the judge's P(yes) for it just
as P(met) is for a required criterion. The reward lies in [-(pitfall weight / required
weight), 1]: below 0 when the pitfalls outweigh what was met. ``normalize="none"`` keeps the
signed sum. A criterion the judge could not assess leaves the reward undefined (None), never 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from plaudit_wire.rubrics import Criterion, CriterionKind, Normalize

#: Focal weights never fall below this share of the rubric weight, so a criterion every
#: completion passes still counts a little (and the required sum never reaches 0).
FOCAL_FLOOR = 0.1


def passed(kind: CriterionKind, p_met: float) -> float:
    """The probability of passing: meeting a required criterion, avoiding a pitfall.

    >>> passed("pitfall", 0.25)
    0.75
    """
    return p_met if kind == "required" else 1.0 - p_met


def focal_weights(
    criteria: Sequence[Criterion], pass_rates: Mapping[str, float], gamma: float
) -> list[float]:
    """Weights moved toward criteria that are not yet passed: w * max(floor, 1 - rate)^gamma.

    A placeholder of Focal Reward's per-criterion reweighting (METHODS.md, related reward
    processors), to be fed by the evaluation memory; criteria without a rate keep their
    weight. ``gamma=0`` gives back the rubric's weights.

    >>> c = [Criterion(id="c1", text="a", weight=2, kind="required", anchor=False)]
    >>> focal_weights(c, {"c1": 0.75}, 1.0)
    [0.5]
    """
    out = []
    for criterion in criteria:
        rate = pass_rates.get(criterion.id)
        factor = 1.0 if rate is None else max(FOCAL_FLOOR, 1.0 - rate) ** gamma
        out.append(criterion.weight * factor)
    return out


def signed_reward(
    criteria: Sequence[Criterion],
    weights: Sequence[float],
    p_met: Sequence[float | None],
    normalize: Normalize,
) -> float | None:
    """The signed, normalised rubric reward, or None when some criterion has no verdict.

    >>> c = [Criterion(id="c1", text="a", weight=3, kind="required", anchor=False),
    ...      Criterion(id="c2", text="b", weight=1, kind="pitfall", anchor=False)]
    >>> signed_reward(c, [3, 1], [1.0, 1.0], "required_weights")
    0.6666666666666666
    >>> signed_reward(c, [3, 1], [0.0, 1.0], "none")
    -1.0
    >>> signed_reward(c, [3, 1], [1.0, None], "none") is None
    True
    """
    if any(p is None for p in p_met):
        return None
    total = 0.0
    required = 0.0
    for criterion, weight, p in zip(criteria, weights, p_met, strict=True):
        assert p is not None
        if criterion.kind == "required":
            total += weight * p
            required += weight
        else:
            total -= weight * p
    if normalize == "none":
        return total
    return total / required if required > 0 else None


def pass_rates(
    criteria: Sequence[Criterion], p_met: Sequence[Sequence[float | None]]
) -> dict[str, float | None]:
    """Per criterion, the mean probability of passing over the completions that assessed it.

    ``p_met[i][k]`` is completion i's P(met) of criterion k.
    """
    out: dict[str, float | None] = {}
    for k, criterion in enumerate(criteria):
        values = [passed(criterion.kind, p) for row in p_met if (p := row[k]) is not None]
        out[criterion.id] = sum(values) / len(values) if values else None
    return out


def kind_pass_rates(
    criteria: Sequence[Criterion], rates: Mapping[str, float | None]
) -> dict[str, float]:
    """The mean pass rate of the required criteria and of the pitfalls (those assessed)."""
    out: dict[str, float] = {}
    for kind in ("required", "pitfall"):
        values = [r for c in criteria if c.kind == kind and (r := rates.get(c.id)) is not None]
        if values:
            out[kind] = sum(values) / len(values)
    return out


def expected_grade(probs: Sequence[float]) -> float:
    """The expected grade of a 1..k distribution.

    >>> expected_grade([0.5, 0.0, 0.5])
    2.0
    """
    return sum((level + 1) * p for level, p in enumerate(probs))


def implicit_reward(probs: Sequence[float]) -> float:
    """The expected 1..k grade mapped onto [0, 1]: (E - 1) / (k - 1).

    >>> implicit_reward([0.0, 0.0, 1.0])
    1.0
    """
    return (expected_grade(probs) - 1.0) / (len(probs) - 1)
