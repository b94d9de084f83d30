"""Jobs that survive their process: how often a job started, and its last checkpoint.

Revision ID: 0011
Revises: 0010 (issue 23: chained after the spec owners migration, written at the same time)
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("attempts", sa.Integer, nullable=False, server_default="0"))
        batch.add_column(sa.Column("checkpoint", sa.JSON, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("checkpoint")
        batch.drop_column("attempts")
