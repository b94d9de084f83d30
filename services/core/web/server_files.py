"""Files on the server that an admin's request names (evaluation ``data``, KARMA
``base_model``), checked without telling a caller anything about files it should not see.

Issue 23: a missing file, a folder, an unreadable or over-long path and a file that is not
what the request needs all get the same answer, so a request cannot probe the file system
("/etc/passwd" used to answer "Expecting value", a missing file "no file"), and an over-long
name is a 422, not a 500.
"""

from __future__ import annotations

from pathlib import Path


def regular_file(path: Path) -> bool:
    """Whether ``path`` is a regular file (False for any path the OS refuses to look at)."""
    try:
        return path.is_file()
    except (OSError, ValueError):  # name too long, NUL, permission
        return False


def model_folder(path: Path) -> bool:
    """Whether ``path`` is a model folder (one holding ``config.json``)."""
    try:
        return path.is_dir() and (path / "config.json").is_file()
    except (OSError, ValueError):
        return False
