"""Stored groups keep what was scored (prompt, completions, columns), for audits and rescoring.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("scored_groups") as batch:
        batch.add_column(sa.Column("inputs", sa.JSON, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("scored_groups") as batch:
        batch.drop_column("inputs")
