"""Rubric synthesis as a service: check a request, run the stages, keep what they made.

::

    service = SynthesisService(rubrics, instances, embedder.embed, judge.model.cached, settings)
    await service.check(request)                       # 422s before any job starts
    result = await service.run(request, job_id, progress)
    page = await service.page(job_id=job_id, status="rejected", stage=None, limit=50, offset=0)
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from plaudit_wire.rubrics import CriterionIn, RubricCreate
from plaudit_wire.schemas import Page
from plaudit_wire.synthesis import (
    InstanceOut,
    InstanceStatus,
    Stage,
    SynthesisResult,
    SynthesizeRequest,
)
from services.core.errors import InvalidInput, NotFound
from services.core.models.cached_judge import CachedJudge
from services.rubrics.service import RubricsService
from services.rubrics.settings import RubricsSettings
from services.rubrics.synthesis import corpus
from services.rubrics.synthesis.corpus import Document
from services.rubrics.synthesis.generator import Candidate
from services.rubrics.synthesis.pipeline import (
    Embed,
    Pipeline,
    Progress,
    Record,
    Resume,
    stage_counts,
    survivor_json,
)
from services.rubrics.synthesis.repository import NewInstance, SqlInstanceRepository


class SynthesisService:
    def __init__(
        self,
        rubrics: RubricsService,
        instances: SqlInstanceRepository,
        embed: Embed,
        judge: CachedJudge,
        settings: RubricsSettings,
        wikipedia_dir: Path | None = None,
    ) -> None:
        self._rubrics = rubrics
        self._instances = instances
        self._embed = embed
        self._judge = judge
        self._settings = settings
        self._wikipedia_dir = wikipedia_dir

    @property
    def instances(self) -> SqlInstanceRepository:
        return self._instances

    def check(self, request: SynthesizeRequest) -> None:
        """422 at once for what the job would fail on: too many documents, an empty
        document, a corpus that is not installed."""
        limit = self._settings.synthesis_max_documents
        if request.documents is not None:
            if len(request.documents) > limit:
                raise InvalidInput(
                    f"{len(request.documents)} documents exceed the limit of {limit}",
                    param="documents",
                )
            for index, doc in enumerate(request.documents):
                if not doc.text.strip():
                    raise InvalidInput(
                        f"documents[{index}].text is empty", param=f"documents[{index}].text"
                    )
            return
        if request.limit > limit:
            raise InvalidInput(
                f"limit {request.limit} exceeds the limit of {limit} documents per job",
                param="limit",
            )
        corpus.require_wikipedia(self._wikipedia_dir)

    async def run(
        self,
        request: SynthesizeRequest,
        job_id: str,
        progress: Progress,
        saved: Any = None,
        checkpoint: Checkpoint | None = None,
    ) -> SynthesisResult:
        """Run the stages over the request's documents and keep every outcome.

        Records are stored a batch at a time, as each becomes final; after each batch
        ``checkpoint`` gets what a retry needs (issue 23): the stored positions and the
        candidates waiting for stage 5. ``saved`` is an earlier attempt's checkpoint: its
        stored records are kept, not generated, judged or stored again."""
        started = time.monotonic()
        resume, earlier_s = _resume_of(saved)
        documents = corpus.documents_of(request, self._wikipedia_dir)
        pipeline = Pipeline(self._rubrics, self._embed, self._judge.generate, self._settings)

        async def settle(final: list[Record], survivors: list[Record]) -> None:
            await self._keep(final, job_id)
            if checkpoint is not None:
                settled = resume.settled | {r.position for r in final}
                seconds = earlier_s + time.monotonic() - started
                await checkpoint(_checkpoint(settled, survivors, seconds))

        await pipeline.run(documents, request, progress, resume, settle)
        await progress(len(documents), len(documents), "storing")
        stored = await self._instances.of_job(job_id)
        seconds = earlier_s + time.monotonic() - started
        return _result(stored, job_id, seconds, self._judge)

    async def page(
        self,
        *,
        job_id: str | None,
        status: InstanceStatus | None,
        stage: Stage | None,
        limit: int,
        offset: int,
    ) -> Page[InstanceOut]:
        items, total = await self._instances.page(
            job_id=job_id, status=status, stage=stage, limit=limit, offset=offset
        )
        return Page(items=items, limit=limit, offset=offset, total=total)

    async def kept(self, job_id: str) -> list[InstanceOut]:
        """A job's kept instances; 404 when the caller knows no candidate of that job."""
        if not await self._instances.job_known(job_id):
            raise NotFound(f"no synthesis job {job_id!r} with stored instances", param="job_id")
        return await self._instances.kept(job_id)

    async def _keep(self, records: Sequence[Record], job_id: str) -> None:
        """Store final records, skipping the positions a killed attempt stored already."""
        stored = await self._instances.positions(job_id)
        fresh = [r for r in records if r.position not in stored]
        refs = await self._rubrics_of([r for r in fresh if r.alive], job_id)
        await self._instances.add_many([_instance(r, job_id, refs.get(r.position)) for r in fresh])

    async def _rubrics_of(self, kept: Sequence[Record], job_id: str) -> dict[int, tuple[str, int]]:
        """The kept records' rubrics: created with ids derived from the job and position,
        so an attempt killed between storing a rubric and its instance left one that the
        retry finds and uses instead of making another."""
        refs: dict[int, tuple[str, int]] = {}
        missing: list[tuple[Record, str]] = []
        for record in kept:
            rubric_id = synthesized_rubric_id(job_id, record.position)
            found = await self._rubrics.find(rubric_id)
            if found is None:
                missing.append((record, rubric_id))
            else:
                refs[record.position] = (found.id, found.version)
        bodies = [_rubric_body(r, job_id) for r, _ in missing]
        created = await self._rubrics.create_many(bodies, ids=[i for _, i in missing])
        for (record, _), out in zip(missing, created, strict=True):
            refs[record.position] = (out.id, out.version)
        return refs


#: ``checkpoint(value)``: keep ``value`` (JSON) for a retry of the job.
Checkpoint = Callable[[dict[str, Any]], Awaitable[None]]


def synthesized_rubric_id(job_id: str, position: int) -> str:
    """The id of the rubric a job makes from its document at ``position`` (the shape of
    :func:`services.rubrics.repository.new_rubric_id`)."""
    return "rb_" + hashlib.sha256(f"{job_id}:{position}".encode()).hexdigest()[:20]


def _checkpoint(settled: set[int], survivors: list[Record], seconds: float) -> dict[str, Any]:
    return {
        "settled": sorted(settled),
        "survivors": {str(r.position): survivor_json(r) for r in survivors},
        "seconds": round(seconds, 2),
    }


def _resume_of(saved: Any) -> tuple[Resume, float]:
    """An earlier attempt's checkpoint as a :class:`Resume` and its seconds (none: afresh)."""
    if not isinstance(saved, dict):
        return Resume(), 0.0
    survivors = {int(k): v for k, v in (saved.get("survivors") or {}).items()}
    settled = {int(p) for p in saved.get("settled") or []}
    return Resume(settled, survivors), float(saved.get("seconds") or 0.0)


def source_of(job_id: str) -> str:
    """The ``source`` of a job's rubrics: ``GET /v1/rubrics?source=synthesis:<job id>``."""
    return f"synthesis:{job_id}"


def _rubric_body(record: Record, job_id: str) -> RubricCreate:
    candidate = record.candidate
    assert candidate is not None
    return RubricCreate(
        name=f"synth {record.document.id}"[:200],
        question=candidate.question,
        reference_answer=candidate.reference_answer,
        domain=record.domain,
        source=source_of(job_id),
        criteria=[
            CriterionIn(text=c.text, weight=c.weight, kind=c.kind) for c in candidate.criteria
        ],
    )


def _instance(record: Record, job_id: str, ref: tuple[str, int] | None) -> NewInstance:
    candidate = record.candidate
    body: dict[str, Any] = {
        "document": {
            "id": record.document.id,
            "title": record.document.title,
            "text": record.document.text[:2000],
        },
        "generated": candidate.as_dict() if candidate is not None else None,
        "measures": record.measures,
    }
    if candidate is None and record.raw is not None:
        body["raw"] = record.raw[:4000]
    return NewInstance(
        job_id=job_id,
        status="kept" if record.alive else "rejected",
        document_id=record.document.id[:200],
        position=record.position,
        candidate=body,
        stage=record.stage,
        reason=record.reason,
        domain=record.domain,
        persona=record.persona,
        question=candidate.question if candidate else None,
        reference_answer=candidate.reference_answer if candidate else None,
        rubric_id=ref[0] if ref else None,
        rubric_version=ref[1] if ref else None,
    )


def _result(
    stored: Sequence[InstanceOut], job_id: str, seconds: float, judge: CachedJudge
) -> SynthesisResult:
    """The job's figures, from its stored instances (the ones of every attempt)."""
    records = [_record_of(row, position) for position, row in enumerate(stored)]
    kept = [r for r in records if r.alive]
    criteria = [len(r.candidate.criteria) for r in kept if r.candidate]
    pitfalls = sum(c.kind == "pitfall" for r in kept if r.candidate for c in r.candidate.criteria)
    info = judge.backend.info
    return SynthesisResult(
        job_id=job_id,
        documents=len(records),
        kept=len(kept),
        retention=len(kept) / len(records) if records else None,
        stages=stage_counts(records),
        criteria_per_instance=sum(criteria) / len(criteria) if criteria else None,
        pitfall_share=pitfalls / sum(criteria) if criteria else None,
        domains=dict(Counter(r.domain or "none" for r in kept)),
        seconds=round(seconds, 2),
        documents_per_minute=round(60 * len(records) / seconds, 2) if seconds > 0 else None,
        generator={"backend": info.name, "model": info.model_id},
        rubric_ids=[
            f"{row.rubric_id}@{row.rubric_version}" for row in stored if row.status == "kept"
        ],
    )


def _record_of(row: InstanceOut, position: int) -> Record:
    document = row.candidate["document"]
    generated = row.candidate.get("generated")
    return Record(
        Document(id=document["id"], text=document["text"], title=document.get("title")),
        position,
        stage=row.stage,
        reason=row.reason,
        domain=row.domain,
        persona=row.persona,
        candidate=Candidate.from_dict(generated) if generated else None,
    )
