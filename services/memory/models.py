"""The evaluation memory's tables (issue 12), on the shared metadata of
:class:`services.core.db.tables.Base`. Every change here needs an Alembic migration."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Boolean, DateTime, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from services.core.db.tables import Base, utcnow


class MemoryRun(Base):
    """One run's memory of one rubric: revision cadence, pause, flags and where it stands."""

    __tablename__ = "memory_runs"

    run_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    rubric_id: Mapped[str] = mapped_column(String(40), primary_key=True)
    owner: Mapped[str | None] = mapped_column(String(40), nullable=True)
    paused: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    revise_every: Mapped[int] = mapped_column(Integer, nullable=False)
    flags: Mapped[list[Any]] = mapped_column(JSON, nullable=False)
    steps: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    last_step: Mapped[int | None] = mapped_column(Integer, nullable=True)
    summarized_step: Mapped[int | None] = mapped_column(Integer, nullable=True)
    revised_step: Mapped[int | None] = mapped_column(Integer, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

    __table_args__ = (Index("ix_memory_runs_updated", "updated_at"),)


class MemoryRollout(Base):
    """One scored group as the memory took it in: texts, rewards and per-criterion verdicts."""

    __tablename__ = "memory_rollouts"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(String(200), nullable=False)
    rubric_id: Mapped[str] = mapped_column(String(40), nullable=False)
    rubric_version: Mapped[int] = mapped_column(Integer, nullable=False)
    step: Mapped[int] = mapped_column(Integer, nullable=False)
    prompt: Mapped[str] = mapped_column(Text, nullable=False)
    completions: Mapped[list[Any]] = mapped_column(JSON, nullable=False)
    rewards: Mapped[list[Any]] = mapped_column(JSON, nullable=False)
    verdicts: Mapped[list[Any]] = mapped_column(JSON, nullable=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

    __table_args__ = (Index("ix_memory_rollouts_run_step", "run_id", "rubric_id", "step"),)


class MemoryRecordRow(Base):
    """A memory record (rollout analysis, step summary, rubric update) with its embedding."""

    __tablename__ = "memory_records"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    run_id: Mapped[str | None] = mapped_column(String(200), nullable=True)
    rubric_id: Mapped[str] = mapped_column(String(40), nullable=False)
    kind: Mapped[str] = mapped_column(String(32), nullable=False)
    step: Mapped[int | None] = mapped_column(Integer, nullable=True)
    text: Mapped[str] = mapped_column(Text, nullable=False)
    data: Mapped[dict[str, Any]] = mapped_column(JSON, nullable=False)
    embedding: Mapped[list[float] | None] = mapped_column(JSON, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

    __table_args__ = (
        Index("ix_memory_records_run_kind_step", "run_id", "kind", "step"),
        Index("ix_memory_records_rubric", "rubric_id"),
    )


class MemoryRevision(Base):
    """One revision of a run's rubric: its job, state, operations and why it ended as it did."""

    __tablename__ = "memory_revisions"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    run_id: Mapped[str] = mapped_column(String(200), nullable=False)
    rubric_id: Mapped[str] = mapped_column(String(40), nullable=False)
    job_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    step: Mapped[int] = mapped_column(Integer, nullable=False)
    state: Mapped[str] = mapped_column(String(16), nullable=False)
    from_version: Mapped[int | None] = mapped_column(Integer, nullable=True)
    to_version: Mapped[int | None] = mapped_column(Integer, nullable=True)
    operations: Mapped[list[Any]] = mapped_column(JSON, nullable=False)
    rationale: Mapped[str | None] = mapped_column(Text, nullable=True)
    evidence: Mapped[list[Any]] = mapped_column(JSON, nullable=False)
    reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    detail: Mapped[dict[str, Any]] = mapped_column(JSON, nullable=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

    __table_args__ = (Index("ix_memory_revisions_run_created", "run_id", "created_at"),)
