"""Stored groups record the key that wrote them and the named spec that scored them.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("scored_groups") as batch:
        batch.add_column(sa.Column("owner", sa.String(40), nullable=True))
        batch.add_column(sa.Column("spec_name", sa.String(200), nullable=True))
        batch.add_column(sa.Column("spec_version", sa.Integer, nullable=True))
    op.create_index("ix_scored_groups_owner_run", "scored_groups", ["owner", "run_id"])


def downgrade() -> None:
    op.drop_index("ix_scored_groups_owner_run", table_name="scored_groups")
    with op.batch_alter_table("scored_groups") as batch:
        batch.drop_column("spec_version")
        batch.drop_column("spec_name")
        batch.drop_column("owner")
