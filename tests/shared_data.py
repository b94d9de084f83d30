"""The project's local copies of the default datasets, for tests that need the full data.

``PLAUDIT_TEST_SHARED_DATA_DIR`` names a folder of prepared copies (``<dir>/<name>``, the form
``plaudit data fetch`` builds); CI sets it (.ci/run). Tests that need a copy skip without it.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV = "PLAUDIT_TEST_SHARED_DATA_DIR"


def shared_copy(name: str, probe: str) -> Path | None:
    """``<dir>/<name>`` when the variable is set and ``probe`` is in it, else None."""
    root = os.environ.get(ENV)
    if not root:
        return None
    folder = Path(root).expanduser() / name
    return folder if (folder / probe).is_file() else None


def reason(name: str) -> str:
    return f"no local copy of the {name} dataset ({ENV} is unset or lacks it)"
