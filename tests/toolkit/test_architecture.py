"""The toolkit's shape: no import cycle between any two of its modules.

Every import counts, including those under ``TYPE_CHECKING`` and inside functions: a lazy
import only hides a cycle from the interpreter, not from a reader. Delegation depends on
narrow protocols, never on the session or the task classes.
"""

from __future__ import annotations

import ast
from pathlib import Path

import external_query_service.toolkit

FOLDER = Path(external_query_service.toolkit.__file__).parent
PACKAGE = "external_query_service.toolkit"


def _topic(name: str) -> str:
    """A toolkit module by what it is about: ``_operations`` is operations."""
    return name[1:] if name.startswith("_") and not name.startswith("__") else name


def _imported_modules(path: Path) -> set[str]:
    """The toolkit modules ``path`` imports (by topic, ``__init__`` excluded)."""
    siblings = {_topic(item.stem) for item in FOLDER.glob("*.py")} - {"__init__"}
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1:
                module = node.module or ""
            elif node.level == 0 and (node.module or "").startswith(PACKAGE + "."):
                module = (node.module or "").removeprefix(PACKAGE + ".")
            else:
                continue
            head = module.split(".")[0]
            if head:
                found.add(_topic(head))
            else:  # "from . import x": x is the module
                found.update(_topic(alias.name) for alias in node.names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(PACKAGE + "."):
                    found.add(_topic(alias.name.removeprefix(PACKAGE + ".").split(".")[0]))
    return found & siblings


def _graph() -> dict[str, set[str]]:
    """Module → the toolkit modules it imports (the package ``__init__`` re-exports all)."""
    return {
        _topic(path.stem): _imported_modules(path) - {_topic(path.stem)}
        for path in sorted(FOLDER.glob("*.py"))
        if path.stem != "__init__"
    }


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` as a path that ends where it starts, or None."""
    done: set[str] = set()
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        if node in path:
            return [*path[path.index(node) :], node]
        if node in done:
            return None
        path.append(node)
        for other in sorted(graph[node]):
            found = visit(other)
            if found is not None:
                return found
        path.pop()
        done.add(node)
        return None

    for start in sorted(graph):
        found = visit(start)
        if found is not None:
            return found
    return None


def test_the_cycle_finder_finds_a_lazy_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}
    assert _cycle(graph) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_the_import_reader_counts_function_local_and_type_checking_imports(
    tmp_path: Path,
) -> None:
    source = tmp_path / "sample.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "from ._tools import Tool\n"
        "from . import _kits\n"
        "if TYPE_CHECKING:\n"
        "    from ._tasks import EvidenceTask\n"
        "def later():\n"
        "    from external_query_service.toolkit._operations import ToolkitSession\n"
        "    from ..store import EvidenceStore\n",
        encoding="utf-8",
    )
    assert _imported_modules(source) == {"tools", "kits", "tasks", "operations"}


def test_no_import_cycle_between_toolkit_modules() -> None:
    graph = _graph()
    assert {"delegate", "operations", "tasks", "kits", "script"} <= set(graph)
    cycle = _cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or ())


def test_delegation_depends_on_protocols_not_on_the_session_or_task() -> None:
    assert not _graph()["delegate"] & {"operations", "tasks", "script", "kits"}
