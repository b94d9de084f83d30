"""The evaluation memory (AMARIS): runs, ingested rollouts, records and revisions.

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def _created() -> sa.Column:  # type: ignore[type-arg]
    return sa.Column("created_at", sa.DateTime(timezone=True), nullable=False)


def upgrade() -> None:
    op.create_table(
        "memory_runs",
        sa.Column("run_id", sa.String(200), nullable=False),
        sa.Column("rubric_id", sa.String(40), nullable=False),
        sa.Column("owner", sa.String(40), nullable=True),
        sa.Column("paused", sa.Boolean, nullable=False),
        sa.Column("revise_every", sa.Integer, nullable=False),
        sa.Column("flags", sa.JSON, nullable=False),
        sa.Column("steps", sa.Integer, nullable=False),
        sa.Column("last_step", sa.Integer, nullable=True),
        sa.Column("summarized_step", sa.Integer, nullable=True),
        sa.Column("revised_step", sa.Integer, nullable=True),
        _created(),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("run_id", "rubric_id", name="pk_memory_runs"),
    )
    op.create_index("ix_memory_runs_updated", "memory_runs", ["updated_at"])
    op.create_table(
        "memory_rollouts",
        sa.Column("id", sa.Integer, autoincrement=True, nullable=False),
        sa.Column("run_id", sa.String(200), nullable=False),
        sa.Column("rubric_id", sa.String(40), nullable=False),
        sa.Column("rubric_version", sa.Integer, nullable=False),
        sa.Column("step", sa.Integer, nullable=False),
        sa.Column("prompt", sa.Text, nullable=False),
        sa.Column("completions", sa.JSON, nullable=False),
        sa.Column("rewards", sa.JSON, nullable=False),
        sa.Column("verdicts", sa.JSON, nullable=False),
        _created(),
        sa.PrimaryKeyConstraint("id", name="pk_memory_rollouts"),
    )
    op.create_index(
        "ix_memory_rollouts_run_step", "memory_rollouts", ["run_id", "rubric_id", "step"]
    )
    op.create_table(
        "memory_records",
        sa.Column("id", sa.String(40), nullable=False),
        sa.Column("run_id", sa.String(200), nullable=True),
        sa.Column("rubric_id", sa.String(40), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("step", sa.Integer, nullable=True),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("data", sa.JSON, nullable=False),
        sa.Column("embedding", sa.JSON, nullable=True),
        _created(),
        sa.PrimaryKeyConstraint("id", name="pk_memory_records"),
    )
    op.create_index("ix_memory_records_run_kind_step", "memory_records", ["run_id", "kind", "step"])
    op.create_index("ix_memory_records_rubric", "memory_records", ["rubric_id"])
    op.create_table(
        "memory_revisions",
        sa.Column("id", sa.String(40), nullable=False),
        sa.Column("run_id", sa.String(200), nullable=False),
        sa.Column("rubric_id", sa.String(40), nullable=False),
        sa.Column("job_id", sa.String(32), nullable=True),
        sa.Column("step", sa.Integer, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("from_version", sa.Integer, nullable=True),
        sa.Column("to_version", sa.Integer, nullable=True),
        sa.Column("operations", sa.JSON, nullable=False),
        sa.Column("rationale", sa.Text, nullable=True),
        sa.Column("evidence", sa.JSON, nullable=False),
        sa.Column("reason", sa.Text, nullable=True),
        sa.Column("detail", sa.JSON, nullable=False),
        _created(),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_memory_revisions"),
    )
    op.create_index("ix_memory_revisions_run_created", "memory_revisions", ["run_id", "created_at"])


def downgrade() -> None:
    op.drop_index("ix_memory_revisions_run_created", table_name="memory_revisions")
    op.drop_table("memory_revisions")
    op.drop_index("ix_memory_records_rubric", table_name="memory_records")
    op.drop_index("ix_memory_records_run_kind_step", table_name="memory_records")
    op.drop_table("memory_records")
    op.drop_index("ix_memory_rollouts_run_step", table_name="memory_rollouts")
    op.drop_table("memory_rollouts")
    op.drop_index("ix_memory_runs_updated", table_name="memory_runs")
    op.drop_table("memory_runs")
