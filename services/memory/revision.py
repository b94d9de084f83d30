"""A revision of a run's rubric, run as the ``memory.revise`` job (never on the scoring path).

1. Analyse a sample of the step's rollouts (the best and the worst rewarded): the analyst's
   reply plus the facts (reward, verdicts), stored as ``rollout_analysis`` records.
2. Retrieve history (:mod:`services.memory.retrieval`): static and dynamic, under a budget.
3. Ask the editor for operations on the adaptive criteria; check each
   (:mod:`services.memory.operations`).
4. Guard (:mod:`services.memory.guard`): undos of recent revisions and verdict flips on the
   frozen rollouts hold the revision for the admin (who approves or dismisses it:
   :mod:`services.memory.approval`).
5. Apply (:meth:`Reviser.publish`): a new rubric version through the rubric service
   (compare-and-set on the version the revision started from), and a ``rubric_update`` record
   with the diff, rationale and evidence.

The revision row says how it ended: ``applied``, ``held`` or ``rejected`` (with the reason
and every operation's verdict), or ``failed``. A held one ends ``applied`` or ``rejected`` when
an admin approves or dismisses it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from judges.generation import GenerateFn
from plaudit_wire.rubrics import (
    Criterion,
    RubricOut,
    RubricUpdate,
)
from services.core.context import OPEN, principal_var
from services.core.db.tables import utcnow
from services.core.errors import Conflict
from services.core.jobs.context import JobContext
from services.memory import guard, llm
from services.memory import retrieval as rt
from services.memory.models import MemoryRecordRow, MemoryRevision
from services.memory.operations import (
    Checked,
    Limits,
    Similar,
    apply_operations,
    check_operations,
    find_undo,
)
from services.memory.oscillation import OscillationEvidence
from services.memory.recorder import TextEmbedder, add_rubric_update
from services.memory.repository import MemoryRepository, RecordFilter, new_id
from services.memory.settings import MemorySettings
from services.memory.stamps import Stamps
from services.memory.texts import analysis_text, describe, name_new_ids, sample_rollouts
from services.memory.views import candidate
from services.rubrics.service import RubricsService

log = logging.getLogger(__name__)

REVISE = "memory.revise"


class Reviser:
    def __init__(
        self,
        settings: MemorySettings,
        repository: MemoryRepository,
        rubrics: RubricsService,
        embedder: TextEmbedder,
        stamps: Stamps,
        call: GenerateFn,
    ) -> None:
        self._settings = settings
        self._repo = repository
        self._rubrics = rubrics
        self._embedder = embedder
        self._stamps = stamps
        self._call = call
        self._evidence = OscillationEvidence(settings, repository, rubrics)

    async def job(self, ctx: JobContext, params: dict[str, Any]) -> dict[str, Any]:
        """The ``memory.revise`` job: ``{"revision_id": "rv_..."}``."""
        principal_var.set(OPEN)  # server work on the run's behalf: every rubric is visible
        revision = await self._repo.revision(str(params["revision_id"]))
        if revision is None:
            raise ValueError(f"unknown revision {params['revision_id']!r}")
        await self._repo.set_revision(revision.id, state="running", job_id=ctx.job_id)
        try:
            outcome = await self.revise(revision, ctx)
        except Exception as exc:
            await self._repo.set_revision(revision.id, state="failed", reason=f"{exc}"[:2000])
            raise
        await self._repo.set_revision(revision.id, **outcome)
        # Issue 21: the job ended on the last stage it reached ("3/5 editing"); it ends at 5/5
        # with the outcome, whichever stage decided it.
        await _progress(ctx, 5, str(outcome["state"]))
        return {"revision_id": revision.id, "state": outcome["state"]}

    async def revise(self, revision: MemoryRevision, ctx: JobContext | None) -> dict[str, Any]:
        """Every stage; the values to set on the revision row."""
        rubric = await self._rubrics.get(revision.rubric_id)
        criteria = list(rubric.criteria)
        summary = await self._summary(revision)
        if summary is None:
            return {"state": "rejected", "reason": f"no summary of step {revision.step}"}
        await _progress(ctx, 1, "analysing")
        analyses = await self._analysed(revision, criteria, ctx)
        await _progress(ctx, 2, "retrieving")
        history = await self._history(revision, summary)
        await _progress(ctx, 3, "editing")
        lines = [h.record.text for h in [*history.static, *history.dynamic]]
        proposal = await llm.propose(
            self._call, criteria, summary.text, lines, self._settings.editor_max_new_tokens
        )
        evidence = [summary.id, *(a.id for a in analyses), *(h.record.id for h in history.dynamic)]
        evidence += [h.record.id for h in history.static]
        base = {
            "from_version": rubric.version,
            "rationale": proposal.rationale or None,
            "evidence": evidence,
        }
        detail: dict[str, Any] = {
            "editor_status": proposal.status,
            "editor_reply": proposal.raw[:4000],
            "retrieved": {"static": len(history.static), "dynamic": len(history.dynamic)},
        }
        if proposal.status != "ok":
            reason = f"the editor's reply was not usable ({proposal.status}: {proposal.error})"
            return _ended(base, "rejected", reason, [], detail)
        checked = await self._check(criteria, proposal)
        operations = [c.wire() for c in checked]
        accepted = [c for c in checked if c.accepted]
        if not accepted:
            reasons = "; ".join(f"{c.operation.op} {c.operation.id}: {c.reason}" for c in checked)
            reason = f"no operation accepted: {reasons}" if checked else "no operation proposed"
            return _ended(base, "rejected", reason, operations, detail)
        await _progress(ctx, 4, "guarding")
        hold = await self._guard(revision, criteria, accepted, summary, detail)
        if hold is not None:
            proposed = apply_operations(criteria, accepted)
            detail["proposed_criteria"] = [c.model_dump() for c in proposed]
            return _ended(base, "held", hold, operations, detail)
        await _progress(ctx, 5, "applying")
        return await self._apply(revision, rubric, accepted, operations, base, detail)

    async def _summary(self, revision: MemoryRevision) -> MemoryRecordRow | None:
        rows, _ = await self._repo.records(
            RecordFilter(revision.run_id, revision.rubric_id, "step_summary", revision.step),
            limit=1,
            offset=0,
        )
        return rows[0] if rows else None

    async def _analysed(
        self, revision: MemoryRevision, criteria: Sequence[Criterion], ctx: JobContext | None
    ) -> list[MemoryRecordRow]:
        """The step's rollout analyses: the ones an earlier attempt stored (its checkpoint), or
        new ones. The analyst's one batched call is the revision's unit of progress that is
        stored; the editor's call after it is one atomic call, and the guard and the apply
        run again on a retry (issue 23)."""
        saved = ctx.checkpoint.get("analyses") if ctx and isinstance(ctx.checkpoint, dict) else None
        if saved is not None:
            rows = [await self._repo.record(str(record_id)) for record_id in saved]
            if all(row is not None for row in rows):
                return [row for row in rows if row is not None]
        records = await self._analyse(revision, criteria)
        if ctx is not None:
            await ctx.save_checkpoint({"analyses": [record.id for record in records]})
        return records

    async def _analyse(
        self, revision: MemoryRevision, criteria: Sequence[Criterion]
    ) -> list[MemoryRecordRow]:
        rows = await self._repo.rollouts(revision.run_id, revision.rubric_id, revision.step)
        picked = sample_rollouts(rows, self._settings.analyses_per_step)
        if not picked:
            return []
        rollouts = [
            llm.Rollout(row.prompt, row.completions[i], row.rewards[i], row.verdicts[i])
            for row, i in picked
        ]
        analyses = await llm.analyse(
            self._call, rollouts, criteria, self._settings.analyst_max_new_tokens
        )
        texts = [analysis_text(r, a, criteria) for r, a in zip(rollouts, analyses, strict=True)]
        vectors = await self._embedder.embed(texts)
        records = [
            MemoryRecordRow(
                id=new_id("mr"),
                run_id=revision.run_id,
                rubric_id=revision.rubric_id,
                kind="rollout_analysis",
                step=revision.step,
                text=text,
                data={
                    "rollout_index": index,
                    "rollout_id": row.id,
                    "completion": i,
                    "reward": rollout.reward,
                    "verdicts": dict(rollout.verdicts),
                    "hacking": analysis.hacking,
                    "analyst_status": analysis.status,
                    "rubric_version": row.rubric_version,
                },
                embedding=[float(x) for x in vector],
                created_at=utcnow(),
            )
            for index, ((row, i), rollout, analysis, text, vector) in enumerate(
                zip(picked, rollouts, analyses, texts, vectors, strict=True)
            )
        ]
        await self._repo.add_records(records)
        return records

    async def _history(self, revision: MemoryRevision, summary: MemoryRecordRow) -> rt.Selection:
        if not self._settings.retrieval:
            return rt.Selection()
        rows, _ = await self._repo.records(
            RecordFilter(run_id=revision.run_id, rubric_id=revision.rubric_id),
            limit=2000,
            offset=0,
        )
        rows = [r for r in rows if r.id != summary.id and r.step != revision.step]
        low = revision.step - self._settings.static_steps
        static = [
            candidate(r)
            for r in rows
            if r.kind in ("step_summary", "rubric_update") and r.step is not None and r.step >= low
        ]
        pool = [candidate(r) for r in rows]
        query = summary.embedding or []
        dynamic = rt.rank(query, pool, top=self._settings.dynamic_top) if query else []
        return rt.select(
            static,
            dynamic,
            budget=self._settings.budget_chars,
            dedup=self._settings.dedup_similarity,
        )

    async def _similar(self, texts: Sequence[str]) -> Similar:
        unique = sorted(set(texts))
        table: dict[str, list[float]] = {}
        if unique:
            vectors = await self._embedder.embed(unique)
            table = {t: [float(x) for x in v] for t, v in zip(unique, vectors, strict=True)}

        def similar(a: str, b: str) -> float:
            if a not in table or b not in table:
                return 0.0
            return rt.cosine(table[a], table[b])

        return similar

    async def _check(self, criteria: Sequence[Criterion], proposal: llm.Proposal) -> list[Checked]:
        texts = [c.text for c in criteria] + [o.text.strip() for o in proposal.operations if o.text]
        similar = await self._similar(texts)
        limits = Limits(
            max_operations=self._settings.max_operations,
            max_criteria=self._rubrics.settings.max_criteria,
            max_weight=self._rubrics.settings.max_weight,
            near_duplicate=self._settings.near_duplicate,
        )
        return check_operations(criteria, proposal.operations, limits, similar)

    async def _guard(
        self,
        revision: MemoryRevision,
        criteria: Sequence[Criterion],
        accepted: Sequence[Checked],
        summary: MemoryRecordRow,
        detail: dict[str, Any],
    ) -> str | None:
        past = await self._evidence.past_operations(revision)
        texts = [o.operation.text for o in accepted] + [str(p.before.get("text", "")) for p in past]
        similar = await self._similar([t for t in texts if t])
        undos = [
            why
            for c in accepted
            if (why := find_undo(c.operation, past, similar, self._settings.near_duplicate))
        ]
        evidence = set(summary.data.get("saturated", [])) | set(
            summary.data.get("non_separating", [])
        )
        started = time.perf_counter()
        flips = await self._evidence.flips(revision, criteria, accepted, evidence)
        detail["undos"] = undos
        detail["flips"] = {
            "seconds": round(time.perf_counter() - started, 3),  # the re-scoring's cost (issue 24)
            "flipped": flips.flipped,
            "compared": flips.compared,
            "criteria": flips.criteria,
            "evidence": sorted(evidence),
        }
        return guard.hold_reason(undos, flips, self._settings.max_flip_rate)

    async def _apply(
        self,
        revision: MemoryRevision,
        rubric: RubricOut,
        accepted: Sequence[Checked],
        operations: list[dict[str, Any]],
        base: dict[str, Any],
        detail: dict[str, Any],
    ) -> dict[str, Any]:
        try:
            record = await self.publish(revision, rubric, accepted, operations, base)
        except Conflict as exc:
            return _ended(base, "rejected", exc.message, operations, detail)
        detail["record_id"] = record.id
        ended = _ended(base, "applied", None, operations, detail)
        return {**ended, "to_version": record.data["to_version"]}

    async def publish(
        self,
        revision: MemoryRevision,
        rubric: RubricOut,
        accepted: Sequence[Checked],
        operations: list[dict[str, Any]],
        base: dict[str, Any],
        extra: dict[str, Any] | None = None,
    ) -> MemoryRecordRow:
        """The apply step, shared by this job and an admin's approval of a held revision, so
        both make a version the same way: the new rubric version (compare-and-set on
        ``rubric.version``: Conflict when the rubric moved on, and nothing is written), the
        ``rubric_update`` record (``extra`` added to its data), and the stamps. Names the new
        criteria's ids in ``operations``; the record's data holds ``to_version``."""
        body = RubricUpdate(
            name=rubric.name or rubric.id,
            question=rubric.question,
            reference_answer=rubric.reference_answer,
            domain=rubric.domain,
            source=rubric.source,
            criteria=apply_operations(rubric.criteria, accepted),
            expected_version=rubric.version,
            note=f"memory revision {revision.id} (run {revision.run_id}, step {revision.step})"[
                :1000
            ],
        )
        saved = await self._rubrics.update(rubric.id, body)
        name_new_ids(operations, rubric, saved)
        record = await self._update_record(
            revision, rubric.version, saved.version, operations, base, extra or {}
        )
        self._stamps.made_version(rubric.id, saved.version, revision.run_id, revision.step)
        return record

    async def _update_record(
        self,
        revision: MemoryRevision,
        old: int,
        new: int,
        operations: list[dict[str, Any]],
        base: dict[str, Any],
        extra: dict[str, Any],
    ) -> MemoryRecordRow:
        done = [o for o in operations if o["accepted"]]
        text = f"Rubric v{old} -> v{new} at step {revision.step}: " + "; ".join(
            describe(o) for o in done
        )
        if base.get("rationale"):
            text += f". Rationale: {base['rationale']}"
        return await add_rubric_update(
            self._repo,
            self._embedder,
            run_id=revision.run_id,
            rubric_id=revision.rubric_id,
            step=revision.step,
            text=text,
            data={
                "operation": "revision",
                "revision_id": revision.id,
                "from_version": old,
                "to_version": new,
                "operations": done,
                "rationale": base.get("rationale"),
                "evidence": base.get("evidence", []),
                **extra,
            },
        )


async def _progress(ctx: JobContext | None, done: int, stage: str) -> None:
    if ctx is not None:
        await ctx.progress(done, 5, stage)


def _ended(
    base: dict[str, Any],
    state: str,
    reason: str | None,
    operations: list[dict[str, Any]],
    detail: dict[str, Any],
) -> dict[str, Any]:
    """The revision row's values for how the job ended (``base``: from_version, rationale,
    evidence)."""
    return {**base, "state": state, "reason": reason, "operations": operations, "detail": detail}
