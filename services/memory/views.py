"""Rows of the memory's tables in their wire form (and as retrieval candidates)."""

from __future__ import annotations

from typing import Any

from plaudit_wire.memory import (
    AnalysisOut,
    Flag,
    RecordOut,
    RevisionOut,
    RunItem,
    StepOut,
    StepStatsOut,
)
from services.core.db.tables import utc_iso
from services.memory.models import MemoryRecordRow, MemoryRevision, MemoryRun
from services.memory.retrieval import Candidate

iso = utc_iso


def candidate(row: MemoryRecordRow) -> Candidate:
    return Candidate(
        id=row.id, kind=row.kind, step=row.step, text=row.text, embedding=row.embedding
    )


def record_out(row: MemoryRecordRow) -> RecordOut:
    return RecordOut(
        id=row.id,
        run_id=row.run_id,
        rubric_id=row.rubric_id,
        kind=row.kind,
        step=row.step,
        text=row.text,
        data=row.data,
        created_at=iso(row.created_at),
    )


def run_item(row: MemoryRun, version: int | None) -> RunItem:
    return RunItem(
        run_id=row.run_id,
        rubric_id=row.rubric_id,
        rubric_version=version,
        steps=row.steps,
        last_step=row.last_step,
        paused=row.paused,
        flags=[Flag(**f) for f in row.flags],
        revise_every=row.revise_every,
        updated_at=iso(row.updated_at),
    )


def step_out(row: MemoryRecordRow) -> StepOut:
    data: dict[str, Any] = row.data
    return StepOut(
        id=row.id,
        step=row.step or 0,
        rubric_id=row.rubric_id,
        rubric_version=data.get("rubric_version"),
        stats=StepStatsOut(
            reward_mean=data.get("reward_mean"),
            reward_std=data.get("reward_std"),
            pass_rates=data.get("pass_rates", {}),
            saturated=data.get("saturated", []),
            non_separating=data.get("non_separating", []),
            groups=data.get("groups", 0),
            completions=data.get("completions", 0),
            length_corr=data.get("length_corr"),
        ),
        summary=row.text,
        created_at=iso(row.created_at),
    )


def analysis_out(row: MemoryRecordRow) -> AnalysisOut:
    data: dict[str, Any] = row.data
    return AnalysisOut(
        id=row.id,
        rollout_index=int(data.get("rollout_index", 0)),
        text=row.text,
        reward=data.get("reward"),
        verdicts=data.get("verdicts", {}),
        hacking=bool(data.get("hacking", False)),
        analyst_status=str(data.get("analyst_status", "ok")),
    )


def revision_out(row: MemoryRevision) -> RevisionOut:
    return RevisionOut(
        id=row.id,
        run_id=row.run_id,
        rubric_id=row.rubric_id,
        job_id=row.job_id,
        step=row.step,
        state=row.state,
        from_version=row.from_version,
        to_version=row.to_version,
        operations=row.operations,
        rationale=row.rationale,
        evidence=row.evidence,
        reason=row.reason,
        detail=row.detail,
        created_at=iso(row.created_at),
        updated_at=iso(row.updated_at),
    )
