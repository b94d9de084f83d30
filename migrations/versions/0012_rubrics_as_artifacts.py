"""Rubrics become artifacts of kind ``rubric`` (issue 20: one versioned store).

Every rubric moves into the artifact tables under its own id as the artifact's name, keeping
its owner, its version numbers, its current and latest version and its times: version N of
the rubric is version N of the artifact, its content unchanged, its note and the rubric's next
free criterion number in the version's metadata. The rubric tables only knew each version's
number, so a version's parent is taken to be the version before it (true unless the edit came
after a rollback), and each version gets its ``create`` event; a rubric whose current version
is not its latest gets one ``rollback`` event to it. Downgrade moves them back.

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

KIND = "rubric"
_EVENT_NOTE = 500

_rubrics = sa.table(
    "rubrics",
    sa.column("id", sa.String),
    sa.column("owner", sa.String),
    sa.column("name", sa.String),
    sa.column("domain", sa.String),
    sa.column("source", sa.String),
    sa.column("current_version", sa.Integer),
    sa.column("latest_version", sa.Integer),
    sa.column("next_criterion", sa.Integer),
    sa.column("created_at", sa.DateTime(timezone=True)),
    sa.column("updated_at", sa.DateTime(timezone=True)),
)
_rubric_versions = sa.table(
    "rubric_versions",
    sa.column("rubric_id", sa.String),
    sa.column("version", sa.Integer),
    sa.column("content", sa.JSON),
    sa.column("content_hash", sa.String),
    sa.column("note", sa.String),
    sa.column("created_at", sa.DateTime(timezone=True)),
)
_artifacts = sa.table(
    "artifacts",
    sa.column("name", sa.String),
    sa.column("kind", sa.String),
    sa.column("current_version", sa.Integer),
    sa.column("latest_version", sa.Integer),
    sa.column("owner", sa.String),
    sa.column("created_at", sa.DateTime(timezone=True)),
    sa.column("updated_at", sa.DateTime(timezone=True)),
)
_versions = sa.table(
    "artifact_versions",
    sa.column("name", sa.String),
    sa.column("version", sa.Integer),
    sa.column("kind", sa.String),
    sa.column("content", sa.JSON),
    sa.column("content_hash", sa.String),
    sa.column("parent_version", sa.Integer),
    sa.column("owner", sa.String),
    sa.column("metadata", sa.JSON),
    sa.column("payload", sa.JSON),
    sa.column("created_at", sa.DateTime(timezone=True)),
)
_events = sa.table(
    "artifact_events",
    sa.column("name", sa.String),
    sa.column("action", sa.String),
    sa.column("from_version", sa.Integer),
    sa.column("to_version", sa.Integer),
    sa.column("owner", sa.String),
    sa.column("note", sa.String),
    sa.column("created_at", sa.DateTime(timezone=True)),
)


def _json_hash(value: Any) -> str:
    """The store's content hash (services.core.store.artifacts.json_hash), fixed here as of 0012."""
    raw = json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(raw.encode()).hexdigest()


def _create_rubric_tables() -> None:
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


def _drop_rubric_tables() -> None:
    op.drop_table("rubric_versions")
    op.drop_index("ix_rubrics_domain", table_name="rubrics")
    op.drop_index("ix_rubrics_owner_updated", table_name="rubrics")
    op.drop_table("rubrics")


def upgrade() -> None:
    bind = op.get_bind()
    heads = bind.execute(sa.select(_rubrics)).mappings().all()
    for head in heads:
        rows = (
            bind.execute(
                sa.select(_rubric_versions)
                .where(_rubric_versions.c.rubric_id == head["id"])
                .order_by(_rubric_versions.c.version)
            )
            .mappings()
            .all()
        )
        _move_up(bind, head, rows)
    _drop_rubric_tables()


def _move_up(bind: Any, head: Any, rows: Any) -> None:
    name, owner = head["id"], head["owner"]
    bind.execute(
        _artifacts.insert().values(
            name=name,
            kind=KIND,
            current_version=head["current_version"],
            latest_version=head["latest_version"],
            owner=owner,
            created_at=head["created_at"],
            updated_at=head["updated_at"],
        )
    )
    for row in rows:
        meta: dict[str, Any] = {"next_criterion": head["next_criterion"]}
        if row["note"] is not None:
            meta["note"] = row["note"]
        parent = row["version"] - 1 or None
        bind.execute(
            _versions.insert().values(
                name=name,
                version=row["version"],
                kind=KIND,
                content=row["content"],
                content_hash=_json_hash(row["content"]),
                parent_version=parent,
                owner=owner,
                metadata=meta,
                payload=None,
                created_at=row["created_at"],
            )
        )
        note = None if row["note"] is None else row["note"][:_EVENT_NOTE]
        _event(bind, name, "create", parent, row["version"], owner, note, row["created_at"])
    if head["current_version"] != head["latest_version"]:
        latest, current = head["latest_version"], head["current_version"]
        _event(bind, name, "rollback", latest, current, owner, None, head["updated_at"])


def _event(
    bind: Any,
    name: str,
    action: str,
    from_version: int | None,
    to_version: int,
    owner: str | None,
    note: str | None,
    at: datetime,
) -> None:
    bind.execute(
        _events.insert().values(
            name=name,
            action=action,
            from_version=from_version,
            to_version=to_version,
            owner=owner,
            note=note,
            created_at=at,
        )
    )


def downgrade() -> None:
    _create_rubric_tables()
    bind = op.get_bind()
    heads = bind.execute(sa.select(_artifacts).where(_artifacts.c.kind == KIND)).mappings().all()
    for head in heads:
        rows = (
            bind.execute(
                sa.select(_versions)
                .where(_versions.c.name == head["name"])
                .order_by(_versions.c.version)
            )
            .mappings()
            .all()
        )
        _move_down(bind, head, rows)
    names = [head["name"] for head in heads]
    for table in (_events, _versions, _artifacts):
        bind.execute(table.delete().where(table.c.name.in_(names)))


def _move_down(bind: Any, head: Any, rows: Any) -> None:
    current = next(r for r in rows if r["version"] == head["current_version"])
    latest = rows[-1]
    content = current["content"]
    bind.execute(
        _rubrics.insert().values(
            id=head["name"],
            owner=head["owner"],
            name=content.get("name"),
            domain=content.get("domain"),
            source=content.get("source"),
            current_version=head["current_version"],
            latest_version=head["latest_version"],
            next_criterion=int((latest["metadata"] or {}).get("next_criterion", 1)),
            created_at=head["created_at"],
            updated_at=head["updated_at"],
        )
    )
    for row in rows:
        bind.execute(
            _rubric_versions.insert().values(
                rubric_id=head["name"],
                version=row["version"],
                content=row["content"],
                content_hash=row["content_hash"],
                note=(row["metadata"] or {}).get("note"),
                created_at=row["created_at"],
            )
        )
