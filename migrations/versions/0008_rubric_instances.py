"""Rubric synthesis: every candidate of a job, kept or rejected (stage and reason).

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "rubric_instances",
        sa.Column("id", sa.String(40), nullable=False),
        sa.Column("job_id", sa.String(32), nullable=False),
        sa.Column("owner", sa.String(64), nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("stage", sa.String(16), nullable=True),
        sa.Column("reason", sa.String(1000), nullable=True),
        sa.Column("document_id", sa.String(200), nullable=False),
        sa.Column("domain", sa.String(100), nullable=True),
        sa.Column("persona", sa.String(200), nullable=True),
        sa.Column("question", sa.Text, nullable=True),
        sa.Column("reference_answer", sa.Text, nullable=True),
        sa.Column("rubric_id", sa.String(40), nullable=True),
        sa.Column("rubric_version", sa.Integer, nullable=True),
        sa.Column("position", sa.Integer, nullable=False),
        sa.Column("candidate", sa.JSON, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_rubric_instances"),
    )
    op.create_index(
        "ix_rubric_instances_job_status", "rubric_instances", ["job_id", "status", "position"]
    )


def downgrade() -> None:
    op.drop_index("ix_rubric_instances_job_status", table_name="rubric_instances")
    op.drop_table("rubric_instances")
