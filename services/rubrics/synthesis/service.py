"""Rubric synthesis as a service: check a request, run the stages, keep what they made.

::

    service = SynthesisService(rubrics, instances, embedder.embed, judge.cached_judge, settings)
    await service.check(request)                       # 422s before any job starts
    result = await service.run(request, job_id, progress)
    page = await service.page(job_id=job_id, status="rejected", stage=None, limit=50, offset=0)
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from services.core.errors import InvalidInput, NotFound
from services.core.schemas import Page
from services.judge.cached import CachedJudge
from services.rubrics.schemas import CriterionIn, RubricCreate
from services.rubrics.service import RubricsService
from services.rubrics.settings import RubricsSettings
from services.rubrics.synthesis import corpus
from services.rubrics.synthesis.pipeline import Embed, Pipeline, Progress, Record, stage_counts
from services.rubrics.synthesis.repository import NewInstance, SqlInstanceRepository
from services.rubrics.synthesis.schemas import (
    InstanceOut,
    InstanceStatus,
    Stage,
    SynthesisResult,
    SynthesizeRequest,
)


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
        self, request: SynthesizeRequest, job_id: str, progress: Progress
    ) -> SynthesisResult:
        """Run the stages over the request's documents and keep every outcome."""
        started = time.monotonic()
        documents = corpus.documents_of(request, self._wikipedia_dir)
        pipeline = Pipeline(self._rubrics, self._embed, self._judge.generate, self._settings)
        records = await pipeline.run(documents, request, progress)
        await progress(len(records), len(records), "storing")
        rubric_refs = await self._keep(records, job_id)
        seconds = time.monotonic() - started
        return _result(records, job_id, rubric_refs, seconds, self._judge)

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

    async def _keep(self, records: Sequence[Record], job_id: str) -> dict[int, tuple[str, int]]:
        kept = [r for r in records if r.alive]
        bodies = [_rubric_body(r, job_id) for r in kept]
        created = await self._rubrics.create_many(bodies)
        refs = {r.position: (out.id, out.version) for r, out in zip(kept, created, strict=True)}
        await self._instances.add_many(
            [_instance(r, job_id, refs.get(r.position)) for r in records]
        )
        return refs


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
    records: Sequence[Record],
    job_id: str,
    refs: dict[int, tuple[str, int]],
    seconds: float,
    judge: CachedJudge,
) -> SynthesisResult:
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
        rubric_ids=[f"{refs[r.position][0]}@{refs[r.position][1]}" for r in kept],
    )
