"""The versioned artifact store: artifacts, their immutable versions, and their history.

Revision ID: 0003
Revises: 0005
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "artifacts",
        sa.Column("name", sa.String(128), primary_key=True),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("current_version", sa.Integer, nullable=False),
        sa.Column("latest_version", sa.Integer, nullable=False),
        sa.Column("owner", sa.String(40), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_artifacts_kind_name", "artifacts", ["kind", "name"])
    op.create_table(
        "artifact_versions",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("content", sa.JSON, nullable=False),
        sa.Column("content_hash", sa.String(64), nullable=False),
        sa.Column("parent_version", sa.Integer, nullable=True),
        sa.Column("owner", sa.String(40), nullable=True),
        sa.Column("metadata", sa.JSON, nullable=False),
        sa.Column("payload", sa.JSON, nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index(
        "uq_artifact_versions_name_version", "artifact_versions", ["name", "version"], unique=True
    )
    op.create_table(
        "artifact_events",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("action", sa.String(16), nullable=False),
        sa.Column("from_version", sa.Integer, nullable=True),
        sa.Column("to_version", sa.Integer, nullable=False),
        sa.Column("owner", sa.String(40), nullable=True),
        sa.Column("note", sa.String(500), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_artifact_events_name_id", "artifact_events", ["name", "id"])


def downgrade() -> None:
    op.drop_index("ix_artifact_events_name_id", table_name="artifact_events")
    op.drop_table("artifact_events")
    op.drop_index("uq_artifact_versions_name_version", table_name="artifact_versions")
    op.drop_table("artifact_versions")
    op.drop_index("ix_artifacts_kind_name", table_name="artifacts")
    op.drop_table("artifacts")
