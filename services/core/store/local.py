"""Store an artifact from a command that ran in this process (``plaudit karma train``,
``plaudit simulator calibrate`` without ``--server``), in the same database and data directory
that ``plaudit serve`` reads, so a server started on this set-up finds it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from plaudit_wire.artifacts import ArtifactVersion


async def put_locally(
    name: str,
    kind: str,
    content: Any,
    *,
    metadata: dict[str, Any],
    files: Path,
    note: str,
    make_current: bool = False,
) -> ArtifactVersion:
    """A new version of ``name`` (current at once when it is the name's first, or when
    ``make_current``), migrating the database first when the settings allow it."""
    from services.core.db import engine as db
    from services.core.settings import CoreSettings
    from services.core.store.artifacts import ArtifactStore

    settings = CoreSettings()  # only the shared fields are read here
    url = settings.resolved_database_url
    if settings.auto_migrate:
        await db.upgrade_async(url)
    engine = db.make_engine(url)
    try:
        artifacts = ArtifactStore(db.make_sessionmaker(engine), settings.data_dir)
        saved = await artifacts.put(
            name,
            kind,
            content,
            metadata=metadata,
            files=files,
            note=note,
            make_current=make_current,
        )
    finally:
        await engine.dispose()
    return saved.version
