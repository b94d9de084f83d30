"""Where the project's shared datasets (``shared/data/<name>``) are, by default.

The data sit beside the checkout (``../shared/data`` from the repository root) on the project's
machines; a server may also run from another folder. The default is the first
``shared/data/<name>`` found above the working directory or above this package, else the
machines' usual place. A setting (``PLAUDIT_KARMA_DATA_DIR``, ``PLAUDIT_SIMULATOR_DATA_DIR``)
always wins.
"""

from __future__ import annotations

from pathlib import Path

#: The project's machines keep the shared data here when nothing closer is found.
FALLBACK_ROOT = Path("/work/shared/data")


def shared_data_dir(name: str) -> Path:
    """``shared/data/<name>`` nearest above the working directory or this package."""
    starts = [Path.cwd().resolve(), Path(__file__).resolve().parent]
    for start in starts:
        for folder in (start, *start.parents):
            candidate = folder / "shared" / "data" / name
            if candidate.is_dir():
                return candidate
    return FALLBACK_ROOT / name
