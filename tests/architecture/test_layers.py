"""The layering of issue 20, read from the source: ``services/core`` (the shared kit) imports
no service, and no service module imports the composed settings at import time (they take a
``CoreSettings``; only entry points read ``services.settings``, so a service folder never
imports the list of services it is on)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SERVICES = ROOT / "services"


def imports(path: Path, *, top_level_only: bool = False) -> Iterator[tuple[int, str]]:
    """``(line, module)`` for each import in ``path`` (only the module's own statements, not
    those inside functions, when ``top_level_only``)."""
    tree = ast.parse(path.read_text(), str(path))
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    for node in nodes:
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, node.module


def service_imports(path: Path) -> list[str]:
    """The modules of services other than ``services.core`` that ``path`` imports."""
    return [
        module
        for _, module in imports(path)
        if module.startswith("services.") and not module.startswith("services.core")
    ]


def test_the_shared_core_imports_no_service() -> None:
    found = {
        str(path.relative_to(ROOT)): service_imports(path)
        for path in sorted((SERVICES / "core").rglob("*.py"))
        if service_imports(path)
    }
    assert found == {}


def test_the_walk_sees_an_import_of_a_service_even_inside_a_function(tmp_path: Path) -> None:
    # The check above can fail: a core module that imports a service is reported.
    module = tmp_path / "bad.py"
    module.write_text("def f():\n    from services.judge.service import JudgeService\n")
    assert service_imports(module) == ["services.judge.service"]


def test_service_modules_import_the_composed_settings_only_inside_functions() -> None:
    # services/settings.py imports services/app.py, which imports every service: a service
    # module importing it at the top would be a cycle.
    entry_points = {SERVICES / "settings.py", SERVICES / "app.py"}
    found = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in sorted(SERVICES.rglob("*.py"))
        if path not in entry_points
        for line, module in imports(path, top_level_only=True)
        if module in ("services.settings", "services.app")
    ]
    assert found == []
