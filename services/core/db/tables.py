"""ORM tables. Every change here needs an Alembic migration in ``migrations/versions``."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


def utcnow() -> datetime:
    return datetime.now(UTC)


def as_utc(moment: datetime) -> datetime:
    """SQLite hands back naive datetimes; every stored one is UTC (the one helper for it)."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def utc_iso(moment: datetime) -> str:
    """A stored time as ISO 8601 in UTC, written with ``Z`` (``2026-12-05T06:55:00Z``): the
    one timestamp format of the API, the form pydantic writes for the models' datetime fields
    (issue 20: artifacts answered ``Z``, rubrics and runs ``+00:00``)."""
    return as_utc(moment).isoformat().replace("+00:00", "Z")


#: Constraint names Alembic can find again on every database.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class ScoredGroup(Base):
    """One scored rollout group, kept so a run can be audited later."""

    __tablename__ = "scored_groups"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    run_id: Mapped[str] = mapped_column(String(200), nullable=False)
    step: Mapped[int | None] = mapped_column(Integer, nullable=True)
    service: Mapped[str] = mapped_column(String(40), nullable=False)
    group_id: Mapped[str | None] = mapped_column(String(200), nullable=True)
    request_hash: Mapped[str] = mapped_column(String(64), nullable=False)
    result: Mapped[dict[str, Any]] = mapped_column(JSON, nullable=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    owner: Mapped[str | None] = mapped_column(String(40), nullable=True)
    spec_name: Mapped[str | None] = mapped_column(String(200), nullable=True)
    spec_version: Mapped[int | None] = mapped_column(Integer, nullable=True)
    inputs: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    """What was scored (prompt, completions, columns), unless ``store_texts`` is off."""

    __table_args__ = (
        Index("ix_scored_groups_run_step", "run_id", "step"),
        Index("ix_scored_groups_owner_run", "owner", "run_id"),
    )


class IdempotencyRecord(Base):
    """A claimed ``Idempotency-Key``: pending while the first request computes, then its answer.

    ``id`` hashes (principal, endpoint, key), so keys are scoped to the API key and the route.
    Times are epoch seconds (floats compare the same way on SQLite and Postgres).
    """

    __tablename__ = "idempotency_records"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    principal: Mapped[str | None] = mapped_column(String(32), nullable=True)
    endpoint: Mapped[str] = mapped_column(String(200), nullable=False)
    key: Mapped[str] = mapped_column(String(200), nullable=False)
    request_hash: Mapped[str] = mapped_column(String(64), nullable=False)
    state: Mapped[str] = mapped_column(String(16), nullable=False)
    token: Mapped[str] = mapped_column(String(32), nullable=False)
    response: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    lease_until: Mapped[float] = mapped_column(Float, nullable=False)
    expires_at: Mapped[float] = mapped_column(Float, nullable=False, index=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


# --- Versioned artifact store (services/core/store/artifacts.py) ----------------------------
# Index names are explicit, so the migration (0003) and these tables compare equal everywhere.
# Versions and events name their artifact without a foreign key: the store always writes the
# artifact row first, in the same transaction, and never deletes anything.


#: Stored artifact names: an owner id (40), "~" and a public name (128); see store_refs.
STORED_NAME_LENGTH = 200


class Artifact(Base):
    """A named artifact and its current-version pointer; versions are never changed."""

    __tablename__ = "artifacts"

    name: Mapped[str] = mapped_column(String(STORED_NAME_LENGTH), primary_key=True)
    kind: Mapped[str] = mapped_column(String(64), nullable=False)
    current_version: Mapped[int] = mapped_column(Integer, nullable=False)
    latest_version: Mapped[int] = mapped_column(Integer, nullable=False)
    owner: Mapped[str | None] = mapped_column(String(40), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

    __table_args__ = (Index("ix_artifacts_kind_name", "kind", "name"),)


class ArtifactVersionRecord(Base):
    """One immutable version: content, its hash, parent, author, metadata, file payload."""

    __tablename__ = "artifact_versions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(STORED_NAME_LENGTH), nullable=False)
    version: Mapped[int] = mapped_column(Integer, nullable=False)
    kind: Mapped[str] = mapped_column(String(64), nullable=False)
    content: Mapped[Any] = mapped_column(JSON, nullable=False)
    content_hash: Mapped[str] = mapped_column(String(64), nullable=False)
    parent_version: Mapped[int | None] = mapped_column(Integer, nullable=True)
    owner: Mapped[str | None] = mapped_column(String(40), nullable=True)
    meta: Mapped[dict[str, Any]] = mapped_column("metadata", JSON, nullable=False)
    payload: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

    # Two writers can never both get version N of one name.
    __table_args__ = (Index("uq_artifact_versions_name_version", "name", "version", unique=True),)


class ArtifactEventRecord(Base):
    """One line of an artifact's history (create, rollback, promote); never rewritten."""

    __tablename__ = "artifact_events"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(STORED_NAME_LENGTH), nullable=False)
    action: Mapped[str] = mapped_column(String(16), nullable=False)
    from_version: Mapped[int | None] = mapped_column(Integer, nullable=True)
    to_version: Mapped[int] = mapped_column(Integer, nullable=False)
    owner: Mapped[str | None] = mapped_column(String(40), nullable=True)
    note: Mapped[str | None] = mapped_column(String(500), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

    __table_args__ = (Index("ix_artifact_events_name_id", "name", "id"),)


class Job(Base):
    """One job: what it runs, where it stands, and who started it (see services/core/jobs)."""

    __tablename__ = "jobs"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    kind: Mapped[str] = mapped_column(String(100), nullable=False)
    state: Mapped[str] = mapped_column(String(16), nullable=False)
    owner: Mapped[str | None] = mapped_column(String(64), nullable=True)
    params: Mapped[dict[str, Any]] = mapped_column(JSON, nullable=False)
    result: Mapped[Any] = mapped_column(JSON, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    progress_done: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    progress_total: Mapped[int | None] = mapped_column(Integer, nullable=True)
    progress_stage: Mapped[str | None] = mapped_column(String(200), nullable=True)
    cancel_requested: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    #: The process holding the job ("host:pid:token"); None while it waits on Redis.
    worker: Mapped[str | None] = mapped_column(String(200), nullable=True)
    #: Renewed by the holding process every jobs.heartbeat_s; a stale lease means it died.
    heartbeat_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    #: How many times a process started the job; a dead process's job is run again while
    #: this is under jobs.max_attempts (issue 23).
    attempts: Mapped[int] = mapped_column(Integer, nullable=False, default=0, server_default="0")
    #: What the job saved to resume from (JobContext.save_checkpoint); None until it saves.
    checkpoint: Mapped[Any] = mapped_column(JSON, nullable=True)

    __table_args__ = (
        Index("ix_jobs_owner_created", "owner", "created_at"),
        Index("ix_jobs_state", "state"),
    )


# --- rubric synthesis (services/rubrics/synthesis/repository.py) ----------------------------


class RubricInstanceRecord(Base):
    """One candidate of a synthesis job: kept (with the rubric it became) or rejected (with
    the stage and the reason); ``candidate`` holds what was generated and the checks' measures."""

    __tablename__ = "rubric_instances"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    job_id: Mapped[str] = mapped_column(String(32), nullable=False)
    owner: Mapped[str | None] = mapped_column(String(64), nullable=True)
    status: Mapped[str] = mapped_column(String(16), nullable=False)
    stage: Mapped[str | None] = mapped_column(String(16), nullable=True)
    reason: Mapped[str | None] = mapped_column(String(1000), nullable=True)
    document_id: Mapped[str] = mapped_column(String(200), nullable=False)
    domain: Mapped[str | None] = mapped_column(String(100), nullable=True)
    persona: Mapped[str | None] = mapped_column(String(200), nullable=True)
    question: Mapped[str | None] = mapped_column(Text, nullable=True)
    reference_answer: Mapped[str | None] = mapped_column(Text, nullable=True)
    rubric_id: Mapped[str | None] = mapped_column(String(40), nullable=True)
    rubric_version: Mapped[int | None] = mapped_column(Integer, nullable=True)
    position: Mapped[int] = mapped_column(Integer, nullable=False)
    candidate: Mapped[dict[str, Any]] = mapped_column(JSON, nullable=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

    __table_args__ = (Index("ix_rubric_instances_job_status", "job_id", "status", "position"),)
