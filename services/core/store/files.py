"""File payloads of artifact versions, written atomically (blocking: call from a thread).

A payload is first copied (and fsynced) into ``<root>/.staging/<random>/``; once the database
has granted the version number, that folder is renamed to ``<root>/<kind>/<name>/<version>/``,
a single rename on the same file system, so a reader sees either nothing or the whole payload.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from services.core.errors import InvalidInput

STAGING = ".staging"
#: A staging folder older than this was left by a writer that died; it is removed.
STALE_STAGING_S = 24 * 3600


@dataclass(frozen=True)
class StagedPayload:
    """A payload copied into staging, with its size and digest."""

    folder: Path
    files: int
    bytes: int
    sha256: str


def version_folder(root: Path, kind: str, name: str, version: int) -> Path:
    """Where version ``version`` of ``name`` keeps its files."""
    return root / kind / name / str(version)


def stage(source: Path, root: Path) -> StagedPayload:
    """Copy ``source`` (a file, or a folder's contents) into a fresh staging folder."""
    if not source.exists():
        raise InvalidInput(f"payload {str(source)!r} does not exist", param="files")
    staging = root / STAGING
    staging.mkdir(parents=True, exist_ok=True)
    _sweep(staging)
    folder = staging / uuid.uuid4().hex
    try:
        if source.is_dir():
            shutil.copytree(source, folder)
        else:
            folder.mkdir()
            shutil.copy2(source, folder / source.name)
        files, size, digest = tree_digest(folder, sync=True)
    except OSError as exc:  # shutil.Error (a file that could not be copied) is one too
        discard(folder)
        message = f"payload {str(source)!r} could not be copied: {exc}"
        raise InvalidInput(message, param="files") from exc
    except BaseException:
        discard(folder)
        raise
    return StagedPayload(folder=folder, files=files, bytes=size, sha256=digest)


def place(staged: StagedPayload, target: Path) -> None:
    """Move the staged folder to ``target`` in one rename.

    The caller holds the version number exclusively (its database transaction is open), so a
    folder already at ``target`` was left by a writer that died before committing: replace it.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists():
        shutil.rmtree(target)
    os.replace(staged.folder, target)
    _fsync_dir(target.parent)


def discard(folder: Path) -> None:
    """Remove a staged or placed folder (after a failed or lost write); missing is fine."""
    shutil.rmtree(folder, ignore_errors=True)


def tree_digest(folder: Path, *, sync: bool = False) -> tuple[int, int, str]:
    """(files, bytes, sha256 over each file's relative path and content), in path order."""
    digest = hashlib.sha256()
    files = size = 0
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        # Path and length first, so no two different trees hash alike.
        header = f"{path.relative_to(folder).as_posix()}\0{path.stat().st_size}\0"
        digest.update(header.encode())
        with path.open("rb") as handle:
            while chunk := handle.read(1 << 20):
                digest.update(chunk)
                size += len(chunk)
            if sync:
                os.fsync(handle.fileno())
        files += 1
    return files, size, digest.hexdigest()


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _sweep(staging: Path) -> None:
    cutoff = time.time() - STALE_STAGING_S
    for entry in staging.iterdir():
        try:
            if entry.stat().st_mtime < cutoff:
                discard(entry)
        except FileNotFoundError:  # another writer swept it first
            continue
