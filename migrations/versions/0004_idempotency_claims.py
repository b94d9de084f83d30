"""Idempotency claims: a pending record is inserted before computing (issue 9).

The old table kept only finished answers under the client's key; stored answers are a replay
cache, so the upgrade replaces the table rather than converting its rows (a retry that spans
the upgrade is computed again).

Revision ID: 0004
Revises: 0001
Create Date: 2026-12-10
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_table("idempotency_records")
    op.create_table(
        "idempotency_records",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("principal", sa.String(32), nullable=True),
        sa.Column("endpoint", sa.String(200), nullable=False),
        sa.Column("key", sa.String(200), nullable=False),
        sa.Column("request_hash", sa.String(64), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("token", sa.String(32), nullable=False),
        sa.Column("response", sa.JSON, nullable=True),
        sa.Column("lease_until", sa.Float, nullable=False),
        sa.Column("expires_at", sa.Float, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_idempotency_records_expires_at", "idempotency_records", ["expires_at"])


def downgrade() -> None:
    op.drop_index("ix_idempotency_records_expires_at", table_name="idempotency_records")
    op.drop_table("idempotency_records")
    op.create_table(
        "idempotency_records",
        sa.Column("key", sa.String(200), primary_key=True),
        sa.Column("endpoint", sa.String(200), nullable=False),
        sa.Column("request_hash", sa.String(64), nullable=False),
        sa.Column("response", sa.JSON, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
