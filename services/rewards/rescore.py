"""Rescoring a stored run with another reward spec, and how the two scorings agree (issue 10).

``POST /v1/runs/{run_id}/rescore`` starts the ``runs.rescore`` job. It reads the run's stored
reward groups (their texts are kept unless ``PLAUDIT_STORE_TEXTS=false``), scores each again
with the new spec (nothing is stored), and reports per group the rank correlation of the old
and new totals, and the share of completions whose advantage keeps its sign (GRPO's: the
total minus the group's mean). Groups stored without texts are counted as skipped. The job
checkpoints after each group, so a retry after its process died scores only the rest.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from pydantic import Field

from plaudit_wire.rewards import RewardsGroupRequest
from plaudit_wire.schemas import StrictModel
from services.core.context import Principal, principal_var
from services.core.db.records import ScoredGroupRepository
from services.core.db.tables import ScoredGroup
from services.core.errors import PlauditError
from services.core.jobs.context import JobContext, JobFunction, JobRegistry
from services.rewards.service import RewardsService

RESCORE = "runs.rescore"
PAGE = 100
#: Groups listed one by one in the result (the summary covers them all).
MAX_LISTED = 1000


class RescoreRequest(StrictModel):
    """``{"spec": {"channels": {"judge_scale": {"k": 10}}}}`` or ``{"spec": "helpful@2"}``."""

    spec: Any = Field(description="the spec to rescore with: inline, or a saved name / name@N")
    step: int | None = Field(default=None, ge=0, le=2**31 - 1, description="only this step")
    max_groups: int = Field(default=10_000, ge=1, le=100_000, description="at most this many")


class RescoreParams(RescoreRequest):
    """The job's parameters: the request, the run, and whose groups it may read."""

    run_id: str
    admin: bool = False


Progress = Callable[[int, int], Awaitable[None]]
Save = Callable[[Any], Awaitable[None]]


def average_ranks(values: Sequence[float]) -> list[float]:
    """Ranks from 1, ties sharing their mean rank: ``[3, 1, 3] -> [2.5, 1.0, 2.5]``."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for position in range(start, end + 1):
            ranks[order[position]] = (start + end) / 2 + 1
        start = end + 1
    return ranks


def rank_correlation(old: Sequence[float], new: Sequence[float]) -> float | None:
    """Spearman's rho (Pearson on average ranks); None when either side has no spread.

    >>> rank_correlation([1, 2, 3], [10, 30, 20])
    0.5
    """
    if len(old) < 2:
        return None
    a, b = average_ranks(old), average_ranks(new)
    mean_a, mean_b = sum(a) / len(a), sum(b) / len(b)
    cov = sum((x - mean_a) * (y - mean_b) for x, y in zip(a, b, strict=True))
    var_a = sum((x - mean_a) ** 2 for x in a)
    var_b = sum((y - mean_b) ** 2 for y in b)
    if var_a == 0 or var_b == 0:
        return None
    return cov / math.sqrt(var_a * var_b)


def advantage_signs(totals: Sequence[float], tolerance: float = 1e-9) -> list[int]:
    """The sign of each total minus the group's mean (0 within ``tolerance``)."""
    mean = sum(totals) / len(totals)
    return [0 if abs(t - mean) <= tolerance else (1 if t > mean else -1) for t in totals]


def compare(old: Sequence[float | None], new: Sequence[float | None]) -> dict[str, Any]:
    """One group's agreement over the completions scored both times."""
    both = [(o, n) for o, n in zip(old, new, strict=True) if o is not None and n is not None]
    if not both:
        return {"compared": 0, "spearman": None, "same_sign": 0}
    olds, news = [o for o, _ in both], [n for _, n in both]
    signs = zip(advantage_signs(olds), advantage_signs(news), strict=True)
    rho = rank_correlation(olds, news)
    return {
        "compared": len(both),
        "spearman": None if rho is None else round(rho, 6),
        "same_sign": sum(1 for a, b in signs if a == b),
    }


@dataclass
class Tally:
    """What the groups rescored so far add up to: a job's checkpoint (issue 23), so a retry
    after its process died goes on after ``last_id`` instead of scoring those groups again."""

    done: int = 0
    last_id: str | None = None
    listed: list[dict[str, Any]] = field(default_factory=list)
    spearmans: list[float] = field(default_factory=list)
    same_sign: int = 0
    compared: int = 0
    skipped: int = 0
    failed: int = 0
    new_hash: str | None = None
    resumed_from: int = 0

    def add(self, row: ScoredGroup, entry: dict[str, Any]) -> None:
        self.done += 1
        self.last_id = row.id
        if entry["status"] == "no_texts":
            self.skipped += 1
        elif entry["status"] == "failed":
            self.failed += 1
        else:
            self.compared += entry["compared"]
            self.same_sign += entry["same_sign"]
            if entry["spearman"] is not None:
                self.spearmans.append(entry["spearman"])
        if len(self.listed) < MAX_LISTED:
            self.listed.append(entry)

    def report(self, run_id: str, groups: int) -> dict[str, Any]:
        spearmans, compared = self.spearmans, self.compared
        return {
            "run_id": run_id,
            "spec_hash": self.new_hash,
            "groups": groups,
            "rescored": groups - self.skipped - self.failed,
            "skipped_without_texts": self.skipped,
            "failed": self.failed,
            "mean_spearman": round(sum(spearmans) / len(spearmans), 6) if spearmans else None,
            "groups_with_spearman": len(spearmans),
            "sign_agreement": round(self.same_sign / compared, 6) if compared else None,
            "completions_compared": compared,
            "resumed_from": self.resumed_from,
            "per_group": self.listed,
        }

    @classmethod
    def resumed(cls, checkpoint: Any, rows: Sequence[ScoredGroup]) -> Tally:
        """The tally a checkpoint holds, if its last group is still among ``rows`` (groups are
        listed in scoring order, so the ones before it are the ones it counted)."""
        try:
            tally = cls(**checkpoint)
        except TypeError:  # none, or not a tally
            return cls()
        ids = [row.id for row in rows[: tally.done]]
        if not ids or ids[-1] != tally.last_id:
            return cls()  # the run changed under it: start afresh
        tally.resumed_from = tally.done
        return tally


async def _read_rows(groups: ScoredGroupRepository, params: RescoreParams) -> list[ScoredGroup]:
    rows: list[ScoredGroup] = []
    offset = 0
    while len(rows) < params.max_groups:
        page, total = await groups.list_for_run(
            params.run_id, step=params.step, service="rewards", limit=PAGE, offset=offset
        )
        rows.extend(page[: params.max_groups - len(rows)])
        offset += PAGE
        if offset >= total:
            break
    return rows


async def _rescore_one(
    service: RewardsService, row: ScoredGroup, spec: Any, tally: Tally
) -> dict[str, Any]:
    """One group's entry of the report (``status``: ok, no_texts or failed)."""
    entry: dict[str, Any] = {
        "id": row.id,
        "step": row.step,
        "old_spec_hash": row.result.get("spec_hash"),
    }
    if row.inputs is None:
        return {**entry, "status": "no_texts"}
    try:
        request = RewardsGroupRequest.model_validate({**row.inputs, "spec": spec})
        response = await service.group(request)
    except PlauditError as exc:
        return {**entry, "status": "failed", "error": str(exc)}
    tally.new_hash = response.spec_hash
    old = [r.get("total") for r in row.result.get("results", [])]
    return {**entry, "status": "ok", **compare(old, [r.total for r in response.results])}


async def rescore_run(
    service: RewardsService,
    groups: ScoredGroupRepository,
    params: RescoreParams,
    progress: Progress | None = None,
    *,
    checkpoint: Any = None,
    save: Save | None = None,
) -> dict[str, Any]:
    """Score the run's stored reward groups again with ``params.spec``; the agreement report.

    ``checkpoint`` is what ``save`` was last given (a :class:`Tally` as a dict): the groups it
    counted are not scored again. ``save`` is called after each group.
    """
    rows = await _read_rows(groups, params)
    tally = Tally.resumed(checkpoint, rows)
    for row in rows[tally.done :]:
        tally.add(row, await _rescore_one(service, row, params.spec, tally))
        if save is not None:
            await save(asdict(tally))
        if progress is not None:
            await progress(tally.done, len(rows))
    return tally.report(params.run_id, len(rows))


def rescore_job(service: RewardsService, groups: ScoredGroupRepository) -> JobFunction:
    """The ``runs.rescore`` job, bound to this process's rewards service."""

    async def run(ctx: JobContext, params: dict[str, Any]) -> dict[str, Any]:
        request = RescoreParams.model_validate(params)
        # The job reads what its starter may read: its own groups, or every tenant's (admin).
        principal_var.set(Principal(owner=ctx.owner, admin=request.admin))

        async def reported(done: int, total: int) -> None:
            await ctx.progress(done, total, "rescoring groups")

        await ctx.progress(0, None, "reading the run")
        return await rescore_run(
            service, groups, request, reported, checkpoint=ctx.checkpoint, save=ctx.save_checkpoint
        )

    return run


def register(registry: JobRegistry, service: RewardsService, groups: ScoredGroupRepository) -> None:
    registry.register(RESCORE, rescore_job(service, groups))
