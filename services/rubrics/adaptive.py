"""The ``adaptive`` option of the rubric channel: scored groups go to the evaluation memory.

With ``"adaptive": true`` and a ``run_id`` on the rewards request, each group scored with a
stored rubric is offered to the memory's sink (``RubricsService.adaptive_sink``, which the
memory component connects through ``send_adaptive_groups_to``): a non-blocking hand-off that
never fails the scoring request. The sink answers the stamp the channel puts in its meta
(``meta.memory``): the rubric version used, the memory's latest version, the step of the
evidence behind the version and how many steps behind the current one that is (``staleness``),
and whether the group was queued or dropped. With ``"aggregation": "focal"`` and no
``pass_rates``, the memory's latest per-criterion pass rates for the run feed Focal weighting.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from plaudit_wire.rubrics import RubricContent, RubricRef, ScoreResponse
from services.core.context import current_principal


@dataclass(frozen=True)
class AdaptiveGroup:
    """One scored group for the memory: texts, rewards and per-criterion P(met)."""

    run_id: str
    step: int
    rubric_id: str
    rubric_version: int
    prompt: str
    texts: list[str]
    rewards: list[float | None]
    verdicts: list[dict[str, float | None]]
    owner: str | None


class AdaptiveSink(Protocol):
    def offer(self, group: AdaptiveGroup) -> dict[str, Any]:
        """Queue ``group`` without waiting (never raises); the stamp for the channel's meta."""
        ...

    def pass_rates(self, run_id: str, rubric_id: str) -> Mapping[str, float] | None:
        """The run's latest per-criterion pass rates (None before the first step summary)."""
        ...


def focal_rates(
    sink: AdaptiveSink | None, run_id: str | None, ref: RubricRef, rubric: RubricContent
) -> dict[str, float] | None:
    """The memory's pass rates of this rubric's criteria for the run, if it has them."""
    if sink is None or run_id is None or ref.id is None:
        return None
    rates = sink.pass_rates(run_id, ref.id) or {}
    ids = {c.id for c in rubric.criteria}
    found = {cid: r for cid, r in rates.items() if cid in ids}
    return found or None


def remember(
    sink: AdaptiveSink | None,
    run_id: str | None,
    step: int | None,
    ref: RubricRef,
    question: str,
    texts: list[str],
    response: ScoreResponse,
) -> dict[str, Any]:
    """Offer the scored group to the memory; the stamp (or why it was not taken)."""
    version = ref.version
    why = None
    if sink is None:
        why = "this process has no evaluation memory"
    elif run_id is None or step is None:
        why = "the request has no run_id and step"
    elif ref.id is None or version is None:
        why = "an inline rubric cannot be revised"
    if why is not None:
        return {"ingested": False, "reason": why, "rubric_version": version}
    assert sink is not None and run_id is not None and step is not None
    assert ref.id is not None and version is not None
    group = AdaptiveGroup(
        run_id=run_id,
        step=step,
        rubric_id=ref.id,
        rubric_version=version,
        prompt=question,
        texts=texts,
        rewards=[r.reward for r in response.results],
        verdicts=[{c.id: c.p for c in r.criteria} for r in response.results],
        owner=current_principal().owner,
    )
    stamp = sink.offer(group)
    stamp["aggregation"] = response.aggregation
    if response.aggregation == "focal" and response.results:
        stamp["weights"] = {c.id: c.weight for c in response.results[0].criteria}
    return stamp
