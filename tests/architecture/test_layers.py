"""The layering of issue 20, read from the source: ``services/core`` (the shared kit) imports
no service, and no service module imports the composed settings at import time (they take a
``CoreSettings``; only entry points read ``services.settings``, so a service folder never
imports the list of services it is on)."""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SERVICES = ROOT / "services"
STDLIB = sys.stdlib_module_names


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


def package_graph() -> dict[str, set[str]]:
    """Service package -> the service packages its modules import (core left out)."""
    graph: dict[str, set[str]] = {}
    for path in SERVICES.rglob("*.py"):
        parts = path.relative_to(SERVICES).parts
        if len(parts) < 2 or parts[0] == "core":
            continue
        needs = graph.setdefault(parts[0], set())
        for _, module in imports(path):
            named = module.split(".")
            if named[0] == "services" and len(named) > 2 and named[1] not in ("core", parts[0]):
                needs.add(named[1])
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every package that reaches itself again, with the path that does."""
    found = []
    for start in sorted(graph):
        stack = [(start, [start])]
        seen: set[str] = set()
        while stack:
            node, path = stack.pop()
            for nxt in sorted(graph.get(node, ())):
                if nxt == start:
                    found.append([*path, start])
                elif nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, [*path, nxt]))
    return found


def test_no_service_package_imports_itself_through_another() -> None:
    assert cycles(package_graph()) == []


def test_the_cycle_search_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}})[0] == ["a", "b", "c", "a"]


#: The rooms of the shared core (issue 20) and the rooms each may import: the web kit stands
#: on the others, the store and the jobs on the database, and the database and the model seam
#: on none. Plain modules at ``services/core/`` (errors, settings, metrics, the composition
#: root) are the hall every room may use.
CORE_ROOMS = {
    "web": {"db", "store", "jobs", "models"},
    "store": {"db"},
    "jobs": {"db"},
    "db": set(),
    "models": set(),
}


def core_room_graph() -> dict[str, set[str]]:
    """Room of ``services/core`` -> the other rooms its modules import."""
    graph: dict[str, set[str]] = {room: set() for room in CORE_ROOMS}
    for path in (SERVICES / "core").rglob("*.py"):
        parts = path.relative_to(SERVICES / "core").parts
        if len(parts) < 2:
            continue
        for _, module in imports(path):
            named = module.split(".")
            inside_core = named[:2] == ["services", "core"] and len(named) > 2
            if inside_core and named[2] in CORE_ROOMS and named[2] != parts[0]:
                graph[parts[0]].add(named[2])
    return graph


def test_the_core_rooms_import_each_other_one_way() -> None:
    graph = core_room_graph()
    assert set(graph) == {p.name for p in (SERVICES / "core").iterdir() if p.is_dir()} - {
        "__pycache__"
    }
    assert {room: needs - CORE_ROOMS[room] for room, needs in graph.items()} == {
        room: set() for room in CORE_ROOMS
    }
    assert cycles(graph) == []


def test_the_wire_package_needs_only_pydantic_and_the_standard_library() -> None:
    # plaudit_wire is what server and client share (issue 20): it must install with the light
    # client and import nothing of either side.
    allowed = {"__future__", "pydantic", "pydantic_core", "typing_extensions", "plaudit_wire"}
    found = [
        f"{path.relative_to(ROOT)}:{line} {module}"
        for path in sorted((ROOT / "plaudit_wire").rglob("*.py"))
        for line, module in imports(path)
        if module.split(".")[0] not in allowed and module.split(".")[0] not in STDLIB
    ]
    assert found == []


def test_the_server_imports_nothing_private_of_the_client() -> None:
    # The server used to import trainer_client._wire and _templates; shared pieces live in
    # plaudit_wire now.
    found = [
        f"{path.relative_to(ROOT)}:{line} {module}"
        for package in ("services", "judges")
        for path in sorted((ROOT / package).rglob("*.py"))
        for line, module in imports(path)
        if module.startswith("trainer_client.") and module.split(".")[1].startswith("_")
    ]
    assert found == []
