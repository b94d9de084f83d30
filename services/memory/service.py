"""The evaluation memory: the sink adaptive rubric channels hand scored groups to, the
revisions it starts, and the reads of the admin API.

Example::

    memory = MemoryService(settings, repository, rubrics, embedder, jobs, call)
    rubrics.send_adaptive_groups_to(memory)   # adaptive channels now feed it
    page = await memory.runs(limit=10, offset=0)
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from prometheus_client import CollectorRegistry

from judges.generation import GenerateFn
from plaudit_wire.memory import (
    CriterionLabel,
    CurvePoint,
    IngestOut,
    IngestRequest,
    IngestStatus,
    PauseOut,
    RecordOut,
    RevisionOut,
    RollbackBody,
    RollbackOut,
    RunDetail,
    RunItem,
    ScoredRecordOut,
    SearchRequest,
    SearchResponse,
    StepDetail,
    StepOut,
)
from plaudit_wire.schemas import Page
from services.core.context import current_principal
from services.core.db.tables import utcnow
from services.core.errors import NotFound
from services.core.jobs.queues import JobQueue
from services.judge.service import prompt_text
from services.memory import retrieval as rt
from services.memory.approval import Approvals
from services.memory.ingest import IngestQueue
from services.memory.models import MemoryRevision
from services.memory.recorder import Recorder, TextEmbedder, add_rubric_update
from services.memory.repository import MemoryRepository, RecordFilter, new_id
from services.memory.revision import REVISE, Reviser
from services.memory.settings import MemorySettings
from services.memory.stamps import Stamps
from services.memory.views import (
    analysis_out,
    candidate,
    record_out,
    revision_out,
    run_item,
    step_out,
)
from services.rubrics.adaptive import AdaptiveGroup
from services.rubrics.service import RubricsService

log = logging.getLogger(__name__)

Queued = tuple[AdaptiveGroup, bool]


class MemoryService:
    """AMARIS's evaluation memory (see the package's modules for each stage)."""

    def __init__(
        self,
        settings: MemorySettings,
        repository: MemoryRepository,
        rubrics: RubricsService,
        embedder: TextEmbedder,
        jobs: JobQueue,
        call: GenerateFn,
        *,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.settings = settings
        self._repo = repository
        self._rubrics = rubrics
        self._embedder = embedder
        self._jobs = jobs
        self.stamps = Stamps()
        self.recorder = Recorder(
            settings, repository, rubrics, embedder, self.stamps, self.start_revision
        )
        self.reviser = Reviser(settings, repository, rubrics, embedder, self.stamps, call)
        self.approvals = Approvals(repository, rubrics, self.reviser)
        self.queue: IngestQueue[Queued] = IngestQueue(
            self._take, size=settings.queue_size, registry=registry
        )

    # --- the sink of adaptive rubric channels (never waits, never raises) ------------------

    def offer(self, group: AdaptiveGroup) -> dict[str, Any]:
        stamp = self.stamps.stamp(group.run_id, group.rubric_id, group.rubric_version, group.step)
        queued = self.queue.offer((group, False))
        return {"ingested": queued, "dropped": not queued, **stamp}

    def pass_rates(self, run_id: str, rubric_id: str) -> Mapping[str, float] | None:
        return self.stamps.pass_rates(run_id, rubric_id)

    async def _take(self, item: Queued) -> None:
        group, close = item
        await self.recorder.take(group, close=close)

    async def drained(self) -> None:
        await self.queue.drained()

    def ingest_status(self) -> IngestStatus:
        queue = self.queue
        return IngestStatus(
            accepted=queue.accepted,
            retried=queue.retried,
            dropped=queue.dropped,
            dropped_by_reason=dict(queue.drops),
            last_drop=queue.last_drop,
            depth=queue.depth,
        )

    async def aclose(self) -> None:
        await self.queue.aclose()

    # --- ingest from trainers that score elsewhere ----------------------------------------

    async def ingest(self, run_id: str, step: int, body: IngestRequest) -> IngestOut:
        await self._check_owner(run_id)
        ref, _ = await self._rubrics.resolve(body.rubric_id, param="rubric_id")
        assert ref.id is not None and ref.version is not None
        accepted = dropped = 0
        for index, item in enumerate(body.groups):
            group = AdaptiveGroup(
                run_id=run_id,
                step=step,
                rubric_id=ref.id,
                rubric_version=ref.version,
                prompt=prompt_text(item.prompt),
                texts=[c.text for c in item.completions],
                rewards=list(item.rewards),
                verdicts=[dict(v) for v in item.verdicts],
                owner=current_principal().owner,
            )
            close = body.close and index == len(body.groups) - 1
            if self.queue.offer((group, close)):
                accepted += 1
            else:
                dropped += 1
        return IngestOut(run_id=run_id, step=step, accepted=accepted, dropped=dropped)

    async def _check_owner(self, run_id: str) -> None:
        principal = current_principal()
        for run in await self._repo.runs_of(run_id):
            if not principal.sees(run.owner):
                raise NotFound(f"unknown run {run_id!r}", param="run_id")

    # --- revisions ------------------------------------------------------------------------

    async def start_revision(self, run_id: str, rubric_id: str, step: int) -> MemoryRevision:
        """A revision row (``queued``) and its ``memory.revise`` job."""
        now = utcnow()
        row = MemoryRevision(
            id=new_id("rv"),
            run_id=run_id,
            rubric_id=rubric_id,
            step=step,
            state="queued",
            operations=[],
            evidence=[],
            detail={},
            created_at=now,
            updated_at=now,
        )
        await self._repo.add_revision(row)
        await self._repo.update_run(run_id, rubric_id, revised_step=step)
        job = await self._jobs.submit(REVISE, {"revision_id": row.id}, owner=None)
        await self._repo.set_revision(row.id, job_id=job.id)
        row.job_id = job.id
        return row

    async def revisions(self, run_id: str, *, limit: int, offset: int) -> Page[RevisionOut]:
        await self._runs(run_id)
        rows, total = await self._repo.revisions(run_id, limit=limit, offset=offset)
        return Page(items=[revision_out(r) for r in rows], limit=limit, offset=offset, total=total)

    async def approve(self, revision_id: str) -> RevisionOut:
        """A held revision applied on an admin's word (see :mod:`services.memory.approval`)."""
        return revision_out(await self.approvals.approve(revision_id))

    async def dismiss(self, revision_id: str) -> RevisionOut:
        """A held revision rejected on an admin's word."""
        return revision_out(await self.approvals.dismiss(revision_id))

    # --- reads ----------------------------------------------------------------------------

    async def runs(self, *, limit: int, offset: int) -> Page[RunItem]:
        rows, total = await self._repo.runs(limit=limit, offset=offset)
        items = [run_item(r, await self._current_version(r.rubric_id)) for r in rows]
        return Page(items=items, limit=limit, offset=offset, total=total)

    async def run(self, run_id: str, rubric_id: str | None = None) -> RunDetail:
        every = await self._runs(run_id)
        row = (
            every[0]
            if rubric_id is None
            else next((r for r in every if r.rubric_id == rubric_id), None)
        )
        if row is None:
            raise NotFound(
                f"run {run_id!r} has no memory of rubric {rubric_id!r}", param="rubric_id"
            )
        rubric = await self._rubrics.get(row.rubric_id)
        summaries, _ = await self._repo.records(
            RecordFilter(run_id=run_id, rubric_id=row.rubric_id, kind="step_summary"),
            limit=100_000,
            offset=0,
            newest_first=False,
        )
        curve = [
            CurvePoint(
                step=s.step or 0,
                reward_mean=s.data.get("reward_mean"),
                reward_std=s.data.get("reward_std"),
                rubric_version=s.data.get("rubric_version"),
                pass_rates=s.data.get("pass_rates", {}),
            )
            for s in summaries
        ]
        item = run_item(row, rubric.version)
        return RunDetail(
            **item.model_dump(),
            curve=curve,
            criteria=[
                CriterionLabel(id=c.id, text=c.text, kind=c.kind, anchor=c.anchor)
                for c in rubric.criteria
            ],
            rubrics=[r.rubric_id for r in every],
        )

    async def steps(self, run_id: str, *, limit: int, offset: int) -> Page[StepOut]:
        await self._runs(run_id)
        rows, total = await self._repo.records(
            RecordFilter(run_id=run_id, kind="step_summary"), limit=limit, offset=offset
        )
        return Page(items=[step_out(r) for r in rows], limit=limit, offset=offset, total=total)

    async def step(self, run_id: str, step: int) -> StepDetail:
        await self._runs(run_id)
        rows, _ = await self._repo.records(
            RecordFilter(run_id=run_id, kind="step_summary", step=step), limit=1, offset=0
        )
        if not rows:
            raise NotFound(f"run {run_id!r} has no summary of step {step}", param="step")
        analyses, _ = await self._repo.records(
            RecordFilter(run_id=run_id, kind="rollout_analysis", step=step),
            limit=1000,
            offset=0,
            newest_first=False,
        )
        found = step_out(rows[0])
        ordered = sorted((analysis_out(a) for a in analyses), key=lambda a: a.rollout_index)
        return StepDetail(**found.model_dump(), analyses=ordered)

    async def records(self, where: RecordFilter, *, limit: int, offset: int) -> Page[RecordOut]:
        rows, total = await self._repo.records(where, limit=limit, offset=offset)
        return Page(items=[record_out(r) for r in rows], limit=limit, offset=offset, total=total)

    async def search(self, body: SearchRequest) -> SearchResponse:
        """Static (the last steps' summaries and updates) and dynamic (most similar) records."""
        await self._runs(body.run_id)
        rows, _ = await self._repo.records(
            RecordFilter(run_id=body.run_id, rubric_id=body.rubric_id), limit=5000, offset=0
        )
        last = max((r.step for r in rows if r.step is not None), default=0)
        low = last - self.settings.static_steps + 1
        static = [
            candidate(r)
            for r in rows
            if r.kind in ("step_summary", "rubric_update") and r.step is not None and r.step >= low
        ]
        [query] = await self._embedder.embed([body.text])
        dynamic = rt.rank(
            [float(x) for x in query], [candidate(r) for r in rows], top=self.settings.dynamic_top
        )
        chosen = rt.select(
            static, dynamic, budget=body.budget, dedup=self.settings.dedup_similarity
        )
        by_id = {r.id: r for r in rows}
        return SearchResponse(
            static=[record_out(by_id[h.record.id]) for h in chosen.static],
            dynamic=[
                ScoredRecordOut(**record_out(by_id[h.record.id]).model_dump(), score=h.score or 0.0)
                for h in chosen.dynamic
            ],
            used=chosen.used,
        )

    # --- admin writes ---------------------------------------------------------------------

    async def set_paused(self, run_id: str, paused: bool) -> PauseOut:
        every = await self._runs(run_id)
        await self._repo.update_run(run_id, None, paused=paused)
        return PauseOut(run_id=run_id, paused=paused, rubrics=[r.rubric_id for r in every])

    async def rollback(self, rubric_id: str, body: RollbackBody) -> RollbackOut:
        """The rubric service's rollback, recorded as a ``rubric_update`` record."""
        before = await self._rubrics.get(rubric_id)
        rubric = await self._rubrics.rollback(rubric_id, body.version, note=body.reason)
        text = f"Admin rollback of {rubric_id}: v{before.version} -> v{rubric.version}"
        if body.reason:
            text += f". Reason: {body.reason}"
        record = await add_rubric_update(
            self._repo,
            self._embedder,
            run_id=body.run_id,
            rubric_id=rubric.id,
            step=await self._last_step(body.run_id, rubric.id),
            text=text,
            data={
                "operation": "rollback",
                "from_version": before.version,
                "to_version": rubric.version,
                "reason": body.reason,
                "by": current_principal().owner,
                "operations": [],
                "evidence": [],
            },
        )
        self.stamps.saw_version(rubric.id, rubric.version)
        return RollbackOut(rubric=rubric, record=record_out(record))

    # --- helpers --------------------------------------------------------------------------

    async def _runs(self, run_id: str) -> list[Any]:
        every = await self._repo.runs_of(run_id)
        if not every:
            raise NotFound(f"the memory holds no run {run_id!r}", param="run_id")
        return every

    async def _last_step(self, run_id: str | None, rubric_id: str) -> int | None:
        if run_id is None:
            return None
        run = await self._repo.run(run_id, rubric_id)
        return None if run is None else run.last_step

    async def _current_version(self, rubric_id: str) -> int | None:
        try:
            return (await self._rubrics.get(rubric_id)).version
        except NotFound:
            return None
