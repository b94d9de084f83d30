"""Scored groups and idempotency records.

Revision ID: 0001
Revises:
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "scored_groups",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("run_id", sa.String(200), nullable=False),
        sa.Column("step", sa.Integer, nullable=True),
        sa.Column("service", sa.String(40), nullable=False),
        sa.Column("group_id", sa.String(200), nullable=True),
        sa.Column("request_hash", sa.String(64), nullable=False),
        sa.Column("result", sa.JSON, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_scored_groups_run_step", "scored_groups", ["run_id", "step"])
    op.create_table(
        "idempotency_records",
        sa.Column("key", sa.String(200), primary_key=True),
        sa.Column("endpoint", sa.String(200), nullable=False),
        sa.Column("request_hash", sa.String(64), nullable=False),
        sa.Column("response", sa.JSON, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("idempotency_records")
    op.drop_index("ix_scored_groups_run_step", table_name="scored_groups")
    op.drop_table("scored_groups")
