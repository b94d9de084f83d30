"""Recording scored groups: store them, summarise each step once it closes, start revisions.

A step *closes* when a group of a later step arrives (or an ingest says ``close``): its
groups are read back, its statistics computed (:mod:`services.memory.stats`), its written
summary stored as a ``step_summary`` record with its embedding, the reward-hacking check run,
and every ``revise_every`` summarised steps a revision job is queued (unless the run is
paused or a revision of it is already queued or running). Each step is summarised once, also
with several replicas ingesting (:meth:`MemoryRepository.claim_summary`).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

import numpy as np

from plaudit_wire.rubrics import Criterion
from services.core.db.tables import utcnow
from services.memory import stats as st
from services.memory.models import MemoryRecordRow, MemoryRollout
from services.memory.repository import MemoryRepository, RecordFilter, new_id
from services.memory.settings import MemorySettings
from services.memory.stamps import Stamps
from services.rubrics.adaptive import AdaptiveGroup
from services.rubrics.service import RubricsService

log = logging.getLogger(__name__)


class TextEmbedder(Protocol):
    async def embed(self, texts: list[str]) -> np.ndarray[Any, Any]: ...


#: Queue a revision of (run_id, rubric_id) after ``step``.
Revise = Callable[[str, str, int], Awaitable[Any]]


async def add_rubric_update(
    repository: MemoryRepository,
    embedder: TextEmbedder,
    *,
    run_id: str | None,
    rubric_id: str,
    step: int | None,
    text: str,
    data: dict[str, Any],
) -> MemoryRecordRow:
    """Keep an edit of a rubric (a revision's, or an admin's rollback) as a ``rubric_update``
    record, embedded so that retrieval finds it."""
    [vector] = await embedder.embed([text])
    record = MemoryRecordRow(
        id=new_id("mr"),
        run_id=run_id,
        rubric_id=rubric_id,
        kind="rubric_update",
        step=step,
        text=text,
        data=data,
        embedding=[float(x) for x in vector],
        created_at=utcnow(),
    )
    await repository.add_records([record])
    return record


class Recorder:
    def __init__(
        self,
        settings: MemorySettings,
        repository: MemoryRepository,
        rubrics: RubricsService,
        embedder: TextEmbedder,
        stamps: Stamps,
        revise: Revise,
    ) -> None:
        self._settings = settings
        self._repo = repository
        self._rubrics = rubrics
        self._embedder = embedder
        self._stamps = stamps
        self._revise = revise
        self._last: dict[tuple[str, str], int | None] = {}
        self._asked: set[tuple[str, int]] = set()

    async def take(self, group: AdaptiveGroup, *, close: bool = False) -> None:
        """Store one scored group; close the steps before it (and its own with ``close``)."""
        key = (group.run_id, group.rubric_id)
        if key not in self._last:
            run = await self._repo.ensure_run(
                group.run_id, group.rubric_id, group.owner, self._settings.revise_every
            )
            self._last[key] = run.last_step
        await self._repo.add_rollouts([_rollout(group)])
        await self._learn_version(group.rubric_id, group.rubric_version)
        last = self._last[key]
        if last is None or group.step > last:
            await self._repo.saw_step(group.run_id, group.rubric_id, group.step)
            self._last[key] = group.step
            await self.close_steps(group.run_id, group.rubric_id, before=group.step)
        if close:
            await self.close_steps(group.run_id, group.rubric_id, before=group.step + 1)

    async def _learn_version(self, rubric_id: str, version: int) -> None:
        """Fill the stamps with a version another process's revision made (a worker's), so
        later groups report its staleness; asked once per version."""
        if (rubric_id, version) in self._asked or self._stamps.knows(rubric_id, version):
            return
        self._asked.add((rubric_id, version))
        made = await self._repo.applied_revision(rubric_id, version)
        if made is not None:
            self._stamps.made_version(rubric_id, version, made.run_id, made.step)

    async def close_steps(self, run_id: str, rubric_id: str, *, before: int) -> None:
        run = await self._repo.run(run_id, rubric_id)
        if run is None:
            return
        for step in await self._repo.open_steps(run_id, rubric_id, run.summarized_step):
            if step >= before:
                break
            await self.summarise(run_id, rubric_id, step)

    async def summarise(self, run_id: str, rubric_id: str, step: int) -> None:
        if not await self._repo.claim_summary(run_id, rubric_id, step):
            return
        rows = await self._repo.rollouts(run_id, rubric_id, step)
        if not rows:
            return
        version = Counter(r.rubric_version for r in rows).most_common(1)[0][0]
        _, content = await self._rubrics.resolve(f"{rubric_id}@{version}", param="rubric_id")
        stats = st.step_stats(
            content.criteria,
            [_verdicts(r) for r in rows],
            saturation=self._settings.saturation_threshold,
        )
        text = st.summary_text(step, content.criteria, stats)
        hacking = await self._hacking(run_id, rubric_id, step, content.criteria, stats)
        [vector] = await self._embedder.embed([text])
        record = MemoryRecordRow(
            id=new_id("mr"),
            run_id=run_id,
            rubric_id=rubric_id,
            kind="step_summary",
            step=step,
            text=text,
            data={**stats.wire(), "rubric_version": version, "hacking": hacking},
            embedding=[float(x) for x in vector],
            created_at=utcnow(),
        )
        await self._repo.add_records([record])
        self._stamps.set_rates(run_id, rubric_id, stats.pass_rates)
        await self._maybe_revise(run_id, rubric_id, step)

    async def _hacking(
        self,
        run_id: str,
        rubric_id: str,
        step: int,
        criteria: Sequence[Criterion],
        stats: st.StepStats,
    ) -> str | None:
        earlier, _ = await self._repo.records(
            RecordFilter(run_id=run_id, rubric_id=rubric_id, kind="step_summary"),
            limit=5,
            offset=0,
            newest_first=False,
        )
        corr = [r.data.get("length_corr") for r in earlier]
        why = st.hacking_signal(criteria, stats, corr, rise=self._settings.hacking_corr_rise)
        if why is not None:
            flag = {"kind": "reward_hacking", "step": step, "detail": why}
            await self._repo.add_flag(run_id, rubric_id, flag)
            log.warning("run %s: reward hacking flagged at step %d", run_id, step)
        return why

    async def _maybe_revise(self, run_id: str, rubric_id: str, step: int) -> None:
        run = await self._repo.run(run_id, rubric_id)
        if run is None or run.paused or run.steps % run.revise_every != 0:
            return
        if await self._repo.active_revision(run_id, rubric_id) is not None:
            return
        await self._revise(run_id, rubric_id, step)


def _rollout(group: AdaptiveGroup) -> MemoryRollout:
    return MemoryRollout(
        run_id=group.run_id,
        rubric_id=group.rubric_id,
        rubric_version=group.rubric_version,
        step=group.step,
        prompt=group.prompt,
        completions=list(group.texts),
        rewards=list(group.rewards),
        verdicts=[dict(v) for v in group.verdicts],
        created_at=utcnow(),
    )


def _verdicts(row: MemoryRollout) -> st.GroupVerdicts:
    return st.GroupVerdicts(
        rewards=list(row.rewards),
        verdicts=list(row.verdicts),
        lengths=[len(t) for t in row.completions],
    )
