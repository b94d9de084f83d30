"""Rubrics: a head row per rubric and its immutable versions.

Revision ID: 0006
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "rubrics",
        sa.Column("id", sa.String(40), nullable=False),
        sa.Column("owner", sa.String(40), nullable=True),
        sa.Column("name", sa.String(200), nullable=True),
        sa.Column("domain", sa.String(100), nullable=True),
        sa.Column("source", sa.String(200), nullable=True),
        sa.Column("current_version", sa.Integer, nullable=False),
        sa.Column("latest_version", sa.Integer, nullable=False),
        sa.Column("next_criterion", sa.Integer, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_rubrics"),
    )
    op.create_index("ix_rubrics_owner_updated", "rubrics", ["owner", "updated_at"])
    op.create_index("ix_rubrics_domain", "rubrics", ["domain"])
    op.create_table(
        "rubric_versions",
        sa.Column("rubric_id", sa.String(40), nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("content", sa.JSON, nullable=False),
        sa.Column("content_hash", sa.String(64), nullable=False),
        sa.Column("note", sa.String(1000), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["rubric_id"],
            ["rubrics.id"],
            name="fk_rubric_versions_rubric_id_rubrics",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("rubric_id", "version", name="pk_rubric_versions"),
    )


def downgrade() -> None:
    op.drop_table("rubric_versions")
    op.drop_index("ix_rubrics_domain", table_name="rubrics")
    op.drop_index("ix_rubrics_owner_updated", table_name="rubrics")
    op.drop_table("rubrics")
