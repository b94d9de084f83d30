"""The five synthesis stages in order, each recording why it rejects (no storage, no HTTP).

::

    pipeline = Pipeline(rubrics_service, embedder.embed, cached_judge.generate, settings)
    records = await pipeline.run(documents, request, progress)
    counts = stage_counts(records)     # kept + rejected per stage = documents

Every document ends as exactly one :class:`Record`: kept, or rejected by one stage with a
reason. Stage 5's discrimination test scores the candidate's reference answer and a
distractor (the reference answer of another candidate in the same domain; of any other
candidate when the domain has no other; a fixed evasive answer when the job has one
candidate) against the candidate's rubric with the rubric service's own scoring.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from judges.generation import GenerateFn
from plaudit_wire.rubrics import CriterionIn, InlineRubric, ScoreOptions
from plaudit_wire.schemas import CompletionItem
from plaudit_wire.synthesis import STAGES, Stage, StageCount, SynthesizeRequest
from services.core.errors import BackendUnavailable, InvalidInput
from services.rubrics.service import RubricsService
from services.rubrics.settings import RubricsSettings
from services.rubrics.synthesis import domains, generator, stages
from services.rubrics.synthesis.corpus import Document
from services.rubrics.synthesis.generator import Brief, Candidate

log = logging.getLogger(__name__)

Embed = Callable[[list[str]], Awaitable[np.ndarray]]
Progress = Callable[[int, int, str], Awaitable[None]]
#: The job's progress names each stage thus.
STAGE_NAMES: dict[Stage, str] = {
    "filter": "filtering documents",
    "domain": "assigning domains",
    "generate": "generating instances",
    "instance": "validating instances",
    "rubric": "validating rubrics",
}
#: Texts per embedding call, so a large job leaves room between its calls for other requests.
EMBED_CHUNK = 256
FALLBACK_DISTRACTOR = "I am not sure. It depends on many things, so there is no single answer."
MET = 0.5


@dataclass
class Record:
    """One document's way through the stages."""

    document: Document
    position: int
    stage: Stage | None = None
    reason: str | None = None
    domain: str | None = None
    persona: str | None = None
    candidate: Candidate | None = None
    raw: str | None = None
    measures: dict[str, Any] = field(default_factory=dict)

    @property
    def alive(self) -> bool:
        return self.stage is None

    def reject(self, stage: Stage, reason: str) -> None:
        self.stage, self.reason = stage, reason[:1000]


class Pipeline:
    def __init__(
        self,
        service: RubricsService,
        embed: Embed,
        generate: GenerateFn,
        settings: RubricsSettings,
    ) -> None:
        self._service = service
        self._embed_call = embed
        self._generate = generate
        self._settings = settings

    async def _embed(self, texts: list[str]) -> np.ndarray:
        parts = [
            await self._embed_call(texts[i : i + EMBED_CHUNK])
            for i in range(0, len(texts), EMBED_CHUNK)
        ]
        return np.concatenate(parts) if parts else np.zeros((0, 0), dtype=np.float32)

    async def run(
        self,
        documents: Sequence[Document],
        request: SynthesizeRequest,
        progress: Progress,
        resume: Resume | None = None,
        settle: Settle | None = None,
    ) -> list[Record]:
        """Every document's record. With ``settle``, records are handed over as soon as
        they are final (a batch at a time), with the candidates still waiting for stage 5;
        ``resume`` says which positions an earlier attempt settled or drafted (issue 23), and
        those are not drafted or judged again."""
        resume = resume or Resume()
        records = [Record(doc, i) for i, doc in enumerate(documents)]
        total = len(records)
        await progress(0, total, STAGE_NAMES["filter"])
        self._filter(records, request)
        await progress(total, total, STAGE_NAMES["filter"])
        doc_vectors = await self._assign(records, request.seed)
        await progress(total, total, STAGE_NAMES["domain"])
        resume.restore(records)
        hand = _Hand(records, resume, settle)
        await hand.over([r for r in records if not r.alive])
        await self._draft(records, request, progress, doc_vectors, hand)
        await self._validate_rubrics(records, request, progress, hand)
        return records

    # --- stage 1 ------------------------------------------------------------------------

    def _filter(self, records: list[Record], request: SynthesizeRequest) -> None:
        seen: set[str] = set()
        for record in records:
            reason = stages.reject_document(record.document.text, request.options, seen)
            if reason is not None:
                record.reject("filter", reason)

    # --- stage 2 ------------------------------------------------------------------------

    async def _assign(self, records: list[Record], seed: int) -> dict[int, np.ndarray]:
        alive = [r for r in records if r.alive]
        if not alive:
            return {}
        vectors = await self._embed([r.document.text for r in alive] + domains.domain_texts())
        docs, labels = vectors[: len(alive)], vectors[len(alive) :]
        ids = [r.document.id for r in alive]
        for record, got in zip(alive, domains.assign(docs, labels, ids, seed), strict=True):
            record.measures["domain_similarity"] = round(got.similarity, 4)
            if got.domain is None:
                record.reject("domain", got.reason or "no_domain")
            else:
                record.domain, record.persona = got.domain, got.persona
        return {r.position: v for r, v in zip(alive, docs, strict=True)}

    # --- stage 3 ------------------------------------------------------------------------

    async def _draft(
        self,
        records: list[Record],
        request: SynthesizeRequest,
        progress: Progress,
        doc_vectors: dict[int, np.ndarray],
        hand: _Hand,
    ) -> None:
        """Stages 3, 4 and the checks of stage 5 that look at one candidate, a batch at a
        time, so that each batch's rejected records are final when it ends."""
        alive = [r for r in records if r.alive and r.position not in hand.resume.drafted]
        batch = self._settings.synthesis_batch
        max_new = request.max_new_tokens or self._settings.synthesis_max_new_tokens
        done = len(records) - len(alive)
        await progress(done, len(records), STAGE_NAMES["generate"])
        for start in range(0, len(alive), batch):
            chunk = alive[start : start + batch]
            briefs = [
                Brief(r.document.id, r.document.text, r.domain or "", r.persona or "")
                for r in chunk
            ]
            drafted = await generator.draft(
                self._generate,
                briefs,
                max_new_tokens=max_new,
                temperature=request.temperature,
                seed=request.seed,
            )
            for record, got in zip(chunk, drafted, strict=True):
                record.raw = got.raw
                if got.candidate is None:
                    record.reject("generate", got.reason or "no_candidate")
                else:
                    record.candidate = got.candidate
            await self._validate_instances(chunk, request, doc_vectors)
            await self._check_rubrics(chunk, request)
            await hand.over([r for r in chunk if not r.alive], survivors=chunk)
            done += len(chunk)
            await progress(done, len(records), STAGE_NAMES["generate"])

    # --- stage 4 ------------------------------------------------------------------------

    async def _validate_instances(
        self, records: list[Record], request: SynthesizeRequest, doc_vectors: dict[int, np.ndarray]
    ) -> None:
        alive = [r for r in records if r.alive]
        for record in alive:
            assert record.candidate is not None
            reason = stages.reject_instance(record.candidate, record.document.text, request.options)
            if reason is not None:
                record.reject("instance", reason)
        alive = [r for r in alive if r.alive]
        if not alive:
            return
        answers = await self._embed([r.candidate.reference_answer for r in alive])  # type: ignore[union-attr]
        for record, vector in zip(alive, answers, strict=True):
            cosine = float(vector @ doc_vectors[record.position])
            record.measures["answer_similarity"] = round(cosine, 4)
            if cosine < request.options.min_similarity:
                record.reject(
                    "instance",
                    f"unfaithful: answer-document cosine {cosine:.2f} < "
                    f"{request.options.min_similarity:g}",
                )

    # --- stage 5 ------------------------------------------------------------------------

    async def _check_rubrics(self, records: list[Record], request: SynthesizeRequest) -> None:
        """Stage 5's checks of each rubric alone: its shape, and no near-duplicate criteria."""
        options = request.options
        alive = [r for r in records if r.alive]
        for record in alive:
            assert record.candidate is not None
            reason = stages.reject_rubric_shape(record.candidate, options)
            if reason is not None:
                record.reject("rubric", reason)
        await self._near_duplicates([r for r in alive if r.alive], options.duplicate_similarity)

    async def _validate_rubrics(
        self, records: list[Record], request: SynthesizeRequest, progress: Progress, hand: _Hand
    ) -> None:
        """Stage 5's discrimination test, a batch at a time; every candidate that passed the
        checks above is a possible distractor, the ones an earlier attempt judged too."""
        survivors = [r for r in records if r.alive and r.candidate is not None]
        todo = [r for r in survivors if r.position not in hand.resume.settled]
        done = len(records) - len(todo)
        await progress(done, len(records), STAGE_NAMES["rubric"])
        batch = self._settings.synthesis_batch
        for start in range(0, len(todo), batch):
            chunk = todo[start : start + batch]
            await asyncio.gather(
                *(self._discriminates(r, _distractor(r, survivors), request) for r in chunk)
            )
            await hand.over(chunk)
            done += len(chunk)
            await progress(done, len(records), STAGE_NAMES["rubric"])

    async def _near_duplicates(self, alive: list[Record], threshold: float) -> None:
        texts = [c.text for r in alive for c in r.candidate.criteria]  # type: ignore[union-attr]
        if not texts:
            return
        vectors = await self._embed(texts)
        at = 0
        for record in alive:
            n = len(record.candidate.criteria)  # type: ignore[union-attr]
            block = vectors[at : at + n]
            at += n
            pair = stages.near_duplicates((block @ block.T).tolist(), threshold)
            if pair is not None:
                i, j = pair
                record.reject(
                    "rubric",
                    f"near_duplicate_criteria: criteria[{i}] and criteria[{j}] "
                    f"(cosine >= {threshold:g})",
                )

    async def _discriminates(
        self, record: Record, distractor: tuple[str, str], request: SynthesizeRequest
    ) -> None:
        candidate = record.candidate
        assert candidate is not None
        options = request.options
        try:
            ref, rubric = self._service.inline(_inline(candidate, record.domain), param="rubric")
            scored = await self._service.score_resolved(
                ref,
                rubric,
                candidate.question,
                [
                    CompletionItem(id="reference", text=candidate.reference_answer),
                    CompletionItem(id="distractor", text=distractor[1]),
                ],
                ScoreOptions(mode=options.mode),
            )
        except InvalidInput as exc:
            record.reject("rubric", f"invalid_rubric: {exc.message}")
            return
        except BackendUnavailable as exc:
            record.reject("rubric", f"judge_unavailable: {exc.message}")
            return
        mine, other = scored.results
        record.measures.update(
            distractor=distractor[0],
            reference_reward=mine.reward,
            distractor_reward=other.reward,
        )
        if mine.reward is None or other.reward is None:
            record.reject("rubric", f"judge_failed: {mine.error or other.error or 'no verdict'}")
            return
        if options.mode != "implicit":
            required = [c for c in mine.criteria if c.kind == "required"]
            met = sum((c.p or 0.0) >= MET for c in required) / len(required)
            record.measures["required_met"] = round(met, 4)
            if met < options.min_required_met:
                record.reject(
                    "rubric",
                    f"reference_fails_rubric: meets {met:.0%} of the required criteria "
                    f"(< {options.min_required_met:.0%})",
                )
                return
        if mine.reward <= other.reward:
            record.reject(
                "rubric",
                f"not_discriminative: the reference answer scores {mine.reward:.3f}, a "
                f"distractor {other.reward:.3f}",
            )


#: ``settle(final, survivors)``: store the records that are final now; ``survivors`` are
#: candidates that passed stages 3 and 4 and wait for stage 5 (a job keeps them in its
#: checkpoint, so a retry does not generate them again).
Settle = Callable[[list[Record], list[Record]], Awaitable[None]]


@dataclass
class Resume:
    """What an earlier attempt of a job did: the positions whose records are stored
    (``settled``), and the candidates that passed stages 3 and 4 (``survivors``, by
    position: ``{"candidate", "raw", "measures"}``), settled or not."""

    settled: set[int] = field(default_factory=set)
    survivors: dict[int, dict[str, Any]] = field(default_factory=dict)

    @property
    def drafted(self) -> set[int]:
        """Positions stage 3 need not see again: stored, or waiting for stage 5."""
        return self.settled | set(self.survivors)

    def restore(self, records: list[Record]) -> None:
        """Give the surviving records their saved candidates (stages 1 and 2 ran again)."""
        for record in records:
            saved = self.survivors.get(record.position)
            if saved is not None and record.alive:
                record.candidate = Candidate.from_dict(saved["candidate"])
                record.raw = saved.get("raw")
                record.measures.update(saved.get("measures") or {})


def survivor_json(record: Record) -> dict[str, Any]:
    """A surviving record's candidate for :class:`Resume` (JSON)."""
    assert record.candidate is not None
    return {
        "candidate": record.candidate.as_dict(),
        "raw": record.raw,
        "measures": record.measures,
    }


class _Hand:
    """Hands settled records to ``settle`` once each, with the survivors so far."""

    def __init__(self, records: list[Record], resume: Resume, settle: Settle | None) -> None:
        self.resume = resume
        self._settle = settle
        self._survivors = {r.position: r for r in records if r.position in resume.survivors}

    async def over(self, final: list[Record], survivors: Sequence[Record] = ()) -> None:
        for record in survivors:
            if record.alive:
                self._survivors[record.position] = record
        fresh = [r for r in final if r.position not in self.resume.settled]
        if self._settle is None or not (fresh or survivors):
            return
        await self._settle(fresh, sorted(self._survivors.values(), key=lambda r: r.position))
        self.resume.settled.update(r.position for r in fresh)


def _inline(candidate: Candidate, domain: str | None) -> InlineRubric:
    return InlineRubric(
        question=candidate.question,
        reference_answer=candidate.reference_answer,
        domain=domain,
        criteria=[
            CriterionIn(text=c.text, weight=c.weight, kind=c.kind) for c in candidate.criteria
        ],
    )


def _distractor(record: Record, pool: Sequence[Record]) -> tuple[str, str]:
    """(document id, answer): the next candidate in the same domain, else the next one."""
    others = [r for r in pool if r is not record]
    same = [r for r in others if r.domain == record.domain]
    for group in (same, others):
        if group:
            after = [r for r in group if r.position > record.position] or group
            chosen = after[0]
            assert chosen.candidate is not None
            return chosen.document.id, chosen.candidate.reference_answer
    return "fallback", FALLBACK_DISTRACTOR


def stage_counts(records: Sequence[Record]) -> list[StageCount]:
    """Per stage: how many documents reached it, how many it rejected, and why (the reason's
    kind, before the colon)."""
    out = []
    entered = len(records)
    for stage in STAGES:
        rejected = [r for r in records if r.stage == stage]
        reasons = Counter((r.reason or "").split(":")[0] for r in rejected)
        out.append(
            StageCount(stage=stage, entered=entered, rejected=len(rejected), reasons=dict(reasons))
        )
        entered -= len(rejected)
    return out
