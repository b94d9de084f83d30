"""ruff and mypy stay clean (STYLE.md): run as part of the suite so CI enforces it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
PACKAGES = ["services", "judges", "plaudit_wire", "trainer_client", "trainer", "bench"]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=ROOT, capture_output=True, text=True)


def test_ruff_check_and_format() -> None:
    targets = [*PACKAGES, "tests", "migrations"]
    existing = [t for t in targets if (ROOT / t).exists()]
    check = _run(str(BIN / "ruff"), "check", *existing)
    assert check.returncode == 0, check.stdout + check.stderr
    fmt = _run(str(BIN / "ruff"), "format", "--check", *existing)
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr


def test_mypy_strict() -> None:
    existing = [p for p in PACKAGES if (ROOT / p).exists()]
    result = _run(str(BIN / "mypy"), *existing)
    assert result.returncode == 0, result.stdout + result.stderr
