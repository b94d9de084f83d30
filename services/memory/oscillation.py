"""The data behind the oscillation guard: the recent revisions' applied operations, and the
frozen rollouts judged on reworded criteria, old text against new."""

from __future__ import annotations

from collections.abc import Sequence

from plaudit_wire.rubrics import Criterion, RubricContent, RubricRef, ScoreOptions
from plaudit_wire.schemas import CompletionItem
from services.memory import guard
from services.memory.models import MemoryRevision, MemoryRollout
from services.memory.operations import Checked, PastOperation
from services.memory.repository import MemoryRepository
from services.memory.settings import MemorySettings
from services.rubrics.service import RubricsService


class OscillationEvidence:
    def __init__(
        self, settings: MemorySettings, repository: MemoryRepository, rubrics: RubricsService
    ) -> None:
        self._settings = settings
        self._repo = repository
        self._rubrics = rubrics

    async def past_operations(self, revision: MemoryRevision) -> list[PastOperation]:
        window = self._settings.undo_window
        if window == 0:
            return []
        applied, _ = await self._repo.revisions(
            revision.run_id,
            rubric_id=revision.rubric_id,
            states=["applied"],
            limit=window,
            offset=0,
        )
        out: list[PastOperation] = []
        for past in reversed(applied):  # oldest first
            for op in past.operations:
                if op.get("accepted"):
                    out.append(
                        PastOperation(
                            revision=past.id,
                            op=op["op"],
                            id=str(op.get("made_id") or op.get("id") or ""),
                            text=str(op.get("text") or ""),
                            weight=float(op.get("weight") or 0.0),
                            before=dict(op.get("before") or {}),
                        )
                    )
        return out

    async def flips(
        self,
        revision: MemoryRevision,
        criteria: Sequence[Criterion],
        accepted: Sequence[Checked],
        evidence: set[str],
    ) -> guard.Flips:
        """Re-judge the frozen rollouts on the reworded criteria, old text against new (the
        only edits that can change an existing criterion's verdicts)."""
        reworded = [
            c for c in accepted if c.operation.op == "reword" and c.operation.id not in evidence
        ]
        frozen = await self._repo.first_rollouts(
            revision.run_id, revision.rubric_id, self._settings.frozen_rollouts
        )
        if not reworded or not frozen:
            return guard.Flips(0, 0, [])
        by_id = {c.id: c for c in criteria}
        old = [by_id[c.operation.id] for c in reworded]
        new = [
            o.model_copy(update={"text": c.operation.text.strip()})
            for o, c in zip(old, reworded, strict=True)
        ]
        before = await self._judge(frozen, old)
        after = await self._judge(frozen, new)
        return guard.verdict_flips(before, after)

    async def _judge(
        self, frozen: Sequence[MemoryRollout], criteria: Sequence[Criterion]
    ) -> list[dict[str, float | None]]:
        content = RubricContent(criteria=list(criteria))
        ref = RubricRef(id=None, version=None, name="memory guard")
        options = ScoreOptions(mode="logprob")
        out: list[dict[str, float | None]] = []
        budget = self._settings.frozen_rollouts
        for row in frozen:
            texts = row.completions[: max(1, budget - len(out))]
            if not texts:
                break
            scored = await self._rubrics.score_resolved(
                ref, content, row.prompt, [CompletionItem(text=t) for t in texts], options
            )
            out.extend({c.id: c.p for c in r.criteria} for r in scored.results)
            if len(out) >= budget:
                break
        return out
