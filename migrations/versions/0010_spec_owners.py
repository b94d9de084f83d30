"""Reward specs belong to the tenant that wrote them (issue 23, finding 1).

A tenant's spec is stored as ``<owner>~<name>`` (see ``services.core.store.refs``), so the name
columns of the artifact tables widen to 200, and every reward spec that a keyed tenant wrote
moves into its writer's namespace. Specs written without keys (owner NULL) stay shared.
Downgrading moves them back where that name is free (a tenant's spec whose name another tenant
also uses keeps its prefixed name) and narrows the columns again.

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

_TABLES = ("artifacts", "artifact_versions", "artifact_events")
_SEPARATOR = "~"


def _resize(length: int, old: int) -> None:
    for table in _TABLES:
        with op.batch_alter_table(table) as batch:
            batch.alter_column(
                "name",
                existing_type=sa.String(old),
                type_=sa.String(length),
                existing_nullable=False,
            )


def _rename(renames: dict[str, str]) -> None:
    bind = op.get_bind()
    for table in _TABLES:
        statement = sa.text(f"UPDATE {table} SET name = :new WHERE name = :old")
        for old, new in renames.items():
            bind.execute(statement, {"old": old, "new": new})


def upgrade() -> None:
    _resize(200, 128)
    rows = op.get_bind().execute(
        sa.text(
            "SELECT name, owner FROM artifacts WHERE kind = 'reward_spec' AND owner IS NOT NULL"
        )
    )
    _rename({name: f"{owner}{_SEPARATOR}{name}" for name, owner in rows})


def downgrade() -> None:
    rows = op.get_bind().execute(sa.text("SELECT name FROM artifacts WHERE kind = 'reward_spec'"))
    names = [name for (name,) in rows]
    taken = {name for name in names if _SEPARATOR not in name}
    renames: dict[str, str] = {}
    for stored in names:
        plain = stored.partition(_SEPARATOR)[2]
        if plain and plain not in taken:
            taken.add(plain)
            renames[stored] = plain
    _rename(renames)
    leftover = [n for n in names if n not in renames and len(n) > 128]
    if leftover:
        raise RuntimeError(f"spec names longer than 128 remain: {leftover[:5]}")
    _resize(128, 200)
