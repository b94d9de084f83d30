"""The versioned artifact store: named artifacts with immutable versions and a current pointer.

Reward specs, rubrics, trained reward models and simulator calibrations are all artifacts.
Every write makes a new version (1, 2, ...) with its content hash, parent version, author and
metadata, and optionally a file payload kept under ``<data_dir>/artifacts/<kind>/<name>/<N>/``.
Rollback and promotion move the current pointer and are recorded as events; nothing is ever
rewritten or deleted.

Concurrency (SQLite and Postgres alike): a write is a compare-and-set on the artifact row
(``UPDATE ... WHERE latest_version = seen AND current_version = seen``), so of two writers that
read the same state exactly one moves it; the other re-reads and either gets 409 (it named a
stale ``expected_version``) or tries again with the next number. The unique index on
(name, version) backs this up.

    store = ArtifactStore(resources.sessions, settings.data_dir)
    saved = await store.put("boil", "rubric", {"criteria": [...]}, expected_version=2)
    spec = await store.resolve("my-spec@3", "reward_spec", param="spec")  # 422 when unknown
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path
from typing import Any, Literal, cast

from sqlalchemy import func, or_, select, update
from sqlalchemy.engine import CursorResult
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from plaudit_wire.artifacts import (
    ArtifactEvent,
    ArtifactInfo,
    ArtifactVersion,
    PointerMove,
    SavedVersion,
    VersionDiff,
    VersionInfo,
)
from plaudit_wire.names import OWNER_SEPARATOR
from services.core.db.tables import Artifact, ArtifactEventRecord, ArtifactVersionRecord, utcnow
from services.core.errors import Conflict, InvalidInput, NotFound
from services.core.store import files as store_files
from services.core.store import rows
from services.core.store.diff import diff_json
from services.core.store.refs import ArtifactRef, check_kind, check_stored_name, parse_ref

#: Compare-and-set attempts before a writer gives up (each loses only to a writer that won).
MAX_ATTEMPTS = 100


def json_hash(value: Any, param: str = "content") -> str:
    """sha256 of the canonical JSON of ``value``; InvalidInput when it is not plain JSON."""
    try:
        raw = json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"{param} is not plain JSON: {exc}", param=param) from None
    return hashlib.sha256(raw.encode()).hexdigest()


class ArtifactStore:
    """Artifacts in the database, payload files under ``<data_dir>/artifacts``."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession], data_dir: Path) -> None:
        self._sessions = sessions
        self._data_dir = data_dir
        self.root = data_dir / "artifacts"

    # --- writes -------------------------------------------------------------------------

    async def put(
        self,
        name: str,
        kind: str,
        content: Any,
        *,
        metadata: dict[str, Any] | None = None,
        files: Path | None = None,
        expected_version: int | None = None,
        owner: str | None = None,
        note: str | None = None,
        make_current: bool = True,
    ) -> SavedVersion:
        """Write a new version of ``name`` and make it current (unless ``make_current`` is
        False: then the pointer stays where it is, except for a new name's first version).

        ``expected_version``: the current version the caller based its edit on (0: the name
        must not exist yet); a stale one raises Conflict (409). Content and metadata equal to
        the current version's, with no ``files``, write nothing: the current version comes back
        with ``created=False`` (so a retried write is harmless). ``files`` (a file or a folder)
        is copied into the version's payload folder atomically.
        """
        check_stored_name(name)
        check_kind(kind)
        if expected_version is not None and expected_version < 0:
            raise InvalidInput("expected_version must be >= 0", param="expected_version")
        rows.check_author(owner, note)
        meta = dict(metadata or {})
        json_hash(meta, "metadata")
        digest = json_hash(content)
        staged = None
        if files is not None:
            staged = await asyncio.to_thread(store_files.stage, files, self.root)
        draft = rows.Draft(
            name, kind, content, digest, meta, staged, expected_version, owner, note, make_current
        )
        try:
            for _ in range(MAX_ATTEMPTS):
                saved = await self._attempt_put(draft)
                if saved is not None:
                    return saved
            raise Conflict(f"{name!r}: too many concurrent writers, retry", param="name")
        finally:
            if staged is not None:  # already renamed away when the write succeeded
                await asyncio.to_thread(store_files.discard, staged.folder)

    async def create_many(
        self,
        kind: str,
        items: list[tuple[str, Any, dict[str, Any]]],
        *,
        owner: str | None = None,
    ) -> list[ArtifactVersion]:
        """Version 1 of several new artifacts (name, content, metadata), all in one
        transaction: every one is stored or none; Conflict (409) when a name exists."""
        check_kind(kind)
        rows.check_author(owner, None)
        now = utcnow()
        heads: list[Artifact] = []
        versions: list[ArtifactVersionRecord] = []
        for name, content, metadata in items:
            check_stored_name(name)
            json_hash(metadata, "metadata")
            draft = rows.Draft(
                name, kind, content, json_hash(content), dict(metadata), None, 0, owner, None
            )
            heads.append(
                Artifact(
                    name=name,
                    kind=kind,
                    current_version=1,
                    latest_version=1,
                    owner=owner,
                    created_at=now,
                    updated_at=now,
                )
            )
            version = rows.version_record(draft, 1, None, None)
            version.created_at = now
            versions.append(version)
        async with self._sessions() as session:
            session.add_all(heads)
            try:
                await session.flush()
            except IntegrityError:
                raise Conflict("an artifact of that name exists already", param="name") from None
            session.add_all(versions)
            session.add_all(
                rows.event_record(v.name, "create", None, 1, owner, None, now) for v in versions
            )
            await session.commit()
        return [rows.version_out(v, 1) for v in versions]

    async def rollback(
        self,
        name: str,
        to: int,
        *,
        expected_version: int | None = None,
        owner: str | None = None,
        note: str | None = None,
    ) -> PointerMove:
        """Make the older version ``to`` current again, and record it (versions stay).

        Rolling back to the current version moves nothing and records nothing (event None).
        """
        return await self._move("rollback", name, to, expected_version, owner, note)

    async def promote(
        self,
        name: str,
        to: int,
        *,
        expected_version: int | None = None,
        owner: str | None = None,
        note: str | None = None,
    ) -> PointerMove:
        """Make version ``to`` (older or newer) current, and record it; no-op when it is."""
        return await self._move("promote", name, to, expected_version, owner, note)

    # --- reads --------------------------------------------------------------------------

    async def info(self, name: str) -> ArtifactInfo:
        """The artifact ``name`` (NotFound when unknown)."""
        async with self._sessions() as session:
            return rows.info_out(await _artifact(session, name))

    async def get(self, name: str, version: int | None = None) -> ArtifactVersion:
        """Version ``version`` of ``name``, or the current one (NotFound when unknown)."""
        async with self._sessions() as session:
            artifact = await _artifact(session, name)
            number = artifact.current_version if version is None else version
            row = await _version_row(session, name, number)
            if row is None:
                raise NotFound(
                    f"{name!r} has no version {number} (versions 1 to {artifact.latest_version})",
                    param="version",
                )
            return rows.version_out(row, artifact.current_version)

    async def pointers(self, name: str) -> tuple[ArtifactInfo, ArtifactVersion, ArtifactVersion]:
        """``name``, its current version and its latest version, read in one session
        (NotFound when unknown)."""
        async with self._sessions() as session:
            artifact = await _artifact(session, name)
            numbers = {artifact.current_version, artifact.latest_version}
            query = select(ArtifactVersionRecord).where(
                ArtifactVersionRecord.name == name, ArtifactVersionRecord.version.in_(numbers)
            )
            found = {row.version: row for row in (await session.scalars(query)).all()}
        current = rows.version_out(found[artifact.current_version], artifact.current_version)
        latest = rows.version_out(found[artifact.latest_version], artifact.current_version)
        return rows.info_out(artifact), current, latest

    async def get_ref(self, ref: str | ArtifactRef, param: str | None = None) -> ArtifactVersion:
        """``name`` or ``name@N``: 422 for a malformed reference, 404 for an unknown one."""
        parsed = parse_ref(ref, param) if isinstance(ref, str) else ref
        return await self.get(parsed.name, parsed.version)

    async def resolve(
        self, ref: str | ArtifactRef, kind: str, *, param: str | None = None
    ) -> ArtifactVersion:
        """The version a request's reference names, checked to be a ``kind``.

        For references that arrive inside a request body: a malformed, unknown or wrong-kind
        reference is InvalidInput (422) pointing at ``param``.
        """
        try:
            found = await self.get_ref(ref, param)
        except NotFound as exc:
            raise InvalidInput(f"unknown {kind}: {exc.message}", param=param) from None
        if found.kind != kind:
            raise InvalidInput(f"{found.name!r} is a {found.kind}, not a {kind}", param=param)
        return found

    async def list_artifacts(
        self,
        *,
        kind: str | None = None,
        limit: int = 100,
        offset: int = 0,
        visible_to: str | None = None,
    ) -> tuple[list[ArtifactInfo], int]:
        """A page of artifacts by name (optionally one kind), and the total count.

        ``visible_to``: an owner id; then only that owner's artifacts and the shared ones (no
        owner prefix in their stored name) are listed.
        """
        where = [] if kind is None else [Artifact.kind == kind]
        if visible_to is not None:
            own = Artifact.name.startswith(visible_to + OWNER_SEPARATOR, autoescape=True)
            where.append(or_(own, ~Artifact.name.contains(OWNER_SEPARATOR, autoescape=True)))
        query = select(Artifact).where(*where).order_by(Artifact.name).limit(limit).offset(offset)
        async with self._sessions() as session:
            total = await session.scalar(select(func.count()).select_from(Artifact).where(*where))
            found = (await session.scalars(query)).all()
        return [rows.info_out(row) for row in found], int(total or 0)

    async def page_current(
        self,
        kind: str,
        *,
        owner: str | None = None,
        content_equals: dict[str, str] | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> tuple[list[tuple[ArtifactInfo, ArtifactVersion]], int]:
        """A page of one kind's artifacts with their current versions, most recently changed
        first, and the total count. ``owner``: only that owner's; ``content_equals``: only
        those whose current content has these top-level string fields."""
        joined = (Artifact.name == ArtifactVersionRecord.name) & (
            Artifact.current_version == ArtifactVersionRecord.version
        )
        where = [Artifact.kind == kind]
        if owner is not None:
            where.append(Artifact.owner == owner)
        for key, value in (content_equals or {}).items():
            where.append(ArtifactVersionRecord.content[key].as_string() == value)
        query = (
            select(Artifact, ArtifactVersionRecord)
            .join(ArtifactVersionRecord, joined)
            .where(*where)
            .order_by(Artifact.updated_at.desc(), Artifact.name)
            .limit(limit)
            .offset(offset)
        )
        count = (
            select(func.count())
            .select_from(Artifact)
            .join(ArtifactVersionRecord, joined)
            .where(*where)
        )
        async with self._sessions() as session:
            total = await session.scalar(count)
            found = (await session.execute(query)).all()
        page = [
            (rows.info_out(head), rows.version_out(version, head.current_version))
            for head, version in found
        ]
        return page, int(total or 0)

    async def all_versions(self, name: str) -> list[ArtifactVersion]:
        """Every version of ``name`` with its content, oldest first (NotFound when unknown)."""
        query = (
            select(ArtifactVersionRecord)
            .where(ArtifactVersionRecord.name == name)
            .order_by(ArtifactVersionRecord.version)
        )
        async with self._sessions() as session:
            artifact = await _artifact(session, name)
            found = (await session.scalars(query)).all()
        return [rows.version_out(row, artifact.current_version) for row in found]

    async def list_versions(
        self, name: str, *, limit: int = 100, offset: int = 0
    ) -> tuple[list[VersionInfo], int]:
        """A page of the versions of ``name``, newest first, and their count."""
        query = (
            select(ArtifactVersionRecord)
            .where(ArtifactVersionRecord.name == name)
            .order_by(ArtifactVersionRecord.version.desc())
            .limit(limit)
            .offset(offset)
        )
        async with self._sessions() as session:
            artifact = await _artifact(session, name)
            found = (await session.scalars(query)).all()
        items = [VersionInfo(**rows.version_fields(r, artifact.current_version)) for r in found]
        return items, artifact.latest_version

    async def history(
        self, name: str, *, limit: int = 100, offset: int = 0
    ) -> tuple[list[ArtifactEvent], int]:
        """A page of the events of ``name`` (creates, rollbacks, promotions), newest first."""
        where = ArtifactEventRecord.name == name
        query = (
            select(ArtifactEventRecord)
            .where(where)
            .order_by(ArtifactEventRecord.id.desc())
            .limit(limit)
            .offset(offset)
        )
        async with self._sessions() as session:
            await _artifact(session, name)
            total = await session.scalar(
                select(func.count()).select_from(ArtifactEventRecord).where(where)
            )
            found = (await session.scalars(query)).all()
        return [rows.event_out(row) for row in found], int(total or 0)

    async def diff(
        self, name: str, from_version: int | None = None, to_version: int | None = None
    ) -> VersionDiff:
        """What changed from ``from_version`` (default: the parent of ``to_version``) to
        ``to_version`` (default: the current version). Version 1 diffs against nothing."""
        new = await self.get(name, to_version)
        base = from_version if from_version is not None else new.parent_version
        old = await self.get(name, base) if base is not None else None
        empty: Any = {} if isinstance(new.content, dict) else None
        content = diff_json(old.content if old else empty, new.content)
        return VersionDiff(
            **content.model_dump(),
            name=name,
            from_version=old.version if old else None,
            to_version=new.version,
            identical=old is not None and old.content_hash == new.content_hash,
            metadata=diff_json(old.metadata if old else {}, new.metadata),
            payload_changed=rows.payload_hash(old) != rows.payload_hash(new),
        )

    def payload_path(self, version: VersionInfo) -> Path | None:
        """The folder holding ``version``'s files, or None when it has none."""
        if version.payload is None:
            return None
        return self._data_dir / version.payload.path

    # --- internals ----------------------------------------------------------------------

    async def _attempt_put(self, draft: rows.Draft) -> SavedVersion | None:
        """One compare-and-set attempt: the saved version, or None when another writer won."""
        async with self._sessions() as session:
            artifact = await session.scalar(select(Artifact).where(Artifact.name == draft.name))
            if artifact is None:
                return await self._create(session, draft)
            if artifact.kind != draft.kind:
                raise Conflict(
                    f"{draft.name!r} is a {artifact.kind}, not a {draft.kind}", param="name"
                )
            current = await _version_row(session, draft.name, artifact.current_version)
            if current is not None and rows.unchanged(current, draft):
                return SavedVersion(
                    version=rows.version_out(current, current.version), created=False
                )
            rows.check_expected(draft.name, draft.expected, artifact.current_version)
            number = artifact.latest_version + 1
            moved = await _execute(
                session,
                update(Artifact)
                .where(
                    Artifact.name == draft.name,
                    Artifact.latest_version == artifact.latest_version,
                    Artifact.current_version == artifact.current_version,
                )
                .values(
                    current_version=number if draft.make_current else artifact.current_version,
                    latest_version=number,
                    updated_at=utcnow(),
                ),
            )
            if moved is None or moved.rowcount != 1:
                await session.rollback()
                return None
            return await self._finish(session, draft, number, artifact.current_version)

    async def _create(self, session: AsyncSession, draft: rows.Draft) -> SavedVersion | None:
        if draft.expected not in (None, 0):
            raise Conflict(
                f"{draft.name!r} does not exist (expected version {draft.expected})",
                param="expected_version",
            )
        now = utcnow()
        session.add(
            Artifact(
                name=draft.name,
                kind=draft.kind,
                current_version=1,
                latest_version=1,
                owner=draft.owner,
                created_at=now,
                updated_at=now,
            )
        )
        try:
            await session.flush()
        except (IntegrityError, OperationalError) as exc:
            # Another writer created it first (or held the SQLite lock too long): retry.
            _reraise_unless_race(exc)
            await session.rollback()
            return None
        return await self._finish(session, draft, 1, None)

    async def _finish(
        self, session: AsyncSession, draft: rows.Draft, number: int, parent: int | None
    ) -> SavedVersion | None:
        """Place the payload, add the version and its event, commit (the number is ours).

        Whatever fails after the payload folder was placed removes it again, so a version's
        folder exists only for a committed version (or is replaced as an orphan later).
        """
        target = None
        if draft.staged is not None:
            target = store_files.version_folder(self.root, draft.kind, draft.name, number)
        try:
            payload = None
            if draft.staged is not None and target is not None:
                await asyncio.to_thread(store_files.place, draft.staged, target)
                payload = rows.payload_info(draft.staged, target.relative_to(self._data_dir))
            row = rows.version_record(draft, number, parent, payload)
            session.add(row)
            session.add(
                rows.event_record(
                    draft.name, "create", parent, number, draft.owner, draft.note, row.created_at
                )
            )
            await session.commit()
        except (IntegrityError, OperationalError) as exc:
            await _discard(target)
            _reraise_unless_race(exc)
            await session.rollback()
            return None
        except BaseException:
            await _discard(target)
            raise
        current = number if draft.make_current or parent is None else parent
        return SavedVersion(version=rows.version_out(row, current), created=True)

    async def _move(
        self,
        action: Literal["rollback", "promote"],
        name: str,
        to: int,
        expected: int | None,
        owner: str | None,
        note: str | None,
    ) -> PointerMove:
        rows.check_author(owner, note)
        for _ in range(MAX_ATTEMPTS):
            async with self._sessions() as session:
                artifact = await _artifact(session, name)
                rows.check_move(action, artifact, to, expected)
                if to == artifact.current_version:
                    return PointerMove(artifact=rows.info_out(artifact), event=None)
                now = utcnow()
                moved = await _execute(
                    session,
                    update(Artifact)
                    .where(
                        Artifact.name == name, Artifact.current_version == artifact.current_version
                    )
                    .values(current_version=to, updated_at=now),
                )
                if moved is None or moved.rowcount != 1:
                    await session.rollback()
                    continue
                event = rows.event_record(
                    name, action, artifact.current_version, to, owner, note, now
                )
                session.add(event)
                await session.commit()
                info = rows.info_out(artifact).model_copy(
                    update={"current_version": to, "updated_at": now}
                )
                return PointerMove(artifact=info, event=rows.event_out(event))
        raise Conflict(f"{name!r}: too many concurrent writers, retry", param="name")


async def _artifact(session: AsyncSession, name: str) -> Artifact:
    found = await session.scalar(select(Artifact).where(Artifact.name == name))
    if found is None:
        raise NotFound(f"no artifact named {name[:140]!r}", param="name")
    return found


async def _version_row(
    session: AsyncSession, name: str, version: int
) -> ArtifactVersionRecord | None:
    query = select(ArtifactVersionRecord).where(
        ArtifactVersionRecord.name == name, ArtifactVersionRecord.version == version
    )
    return cast(ArtifactVersionRecord | None, await session.scalar(query))


async def _execute(session: AsyncSession, statement: Any) -> CursorResult[Any] | None:
    """Run an UPDATE; None when SQLite stayed locked past its busy timeout (try again)."""
    try:
        result = await session.execute(statement, execution_options={"synchronize_session": False})
    except OperationalError as exc:
        _reraise_unless_race(exc)
        await session.rollback()
        return None
    return cast(CursorResult[Any], result)


def _reraise_unless_race(exc: Exception) -> None:
    """Lost races are retried; anything else is a real error."""
    if isinstance(exc, IntegrityError):
        return
    if "database is locked" in str(exc):
        return
    raise exc


async def _discard(target: Path | None) -> None:
    if target is not None:
        await asyncio.to_thread(store_files.discard, target)
