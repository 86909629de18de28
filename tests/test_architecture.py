"""The package's shape: no import cycles between folders, and each folder keeps its rule.

The units are the package's folders and top-level modules. Every ``from``/``import`` counts,
including those under ``TYPE_CHECKING`` and inside functions: a cycle hidden in a function is
still a cycle a reader has to hold in their head.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import external_query_service

PACKAGE = "external_query_service"
ROOT = Path(external_query_service.__file__).parent


def _imports(path: Path) -> Iterator[str]:
    """Absolute dotted names of what ``path`` imports from this package or outside it."""
    relative = path.relative_to(ROOT.parent).with_suffix("")
    package = list(relative.parts[:-1])
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            if module == PACKAGE:  # "from . import x": x is the unit
                yield from (f"{module}.{alias.name}" for alias in node.names)
            else:
                yield module


def _unit(dotted: str) -> str | None:
    parts = dotted.split(".")
    if parts[0] != PACKAGE or len(parts) < 2:
        return None
    return parts[1]


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in ROOT.rglob("*.py"):
        relative = path.relative_to(ROOT)
        source = relative.parts[0].removesuffix(".py")
        if source == "__init__":
            continue  # the package root re-exports everything, lazily
        edges = graph.setdefault(source, set())
        for name in _imports(path):
            target = _unit(name)
            if target is not None and target != source:
                edges.add(target)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one unit (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_between_folders_and_top_level_modules() -> None:
    graph = _graph()
    assert {"net", "text", "gateway", "adapters", "verifier", "service"} <= set(graph)
    assert _cycles(graph) == []


def _third_party(unit: str) -> set[str]:
    folder = ROOT / unit
    paths = folder.rglob("*.py") if folder.is_dir() else [ROOT / f"{unit}.py"]
    return {name.split(".")[0] for path in paths for name in _imports(path)}


def test_text_is_pure_it_neither_connects_nor_reads_settings() -> None:
    graph = _graph()
    assert graph["text"] <= {"errors"}
    assert not _third_party("text") & {"httpx", "httpcore", "socket", "sqlite3"}


def test_the_gateway_orchestrates_and_leaves_sockets_to_net() -> None:
    assert not _third_party("gateway") & {"httpx", "httpcore", "socket"}
    assert not _third_party("verifier") & {"httpx", "httpcore", "socket"}


def test_only_storage_talks_to_a_database() -> None:
    clients = {"sqlite3", "psycopg", "psycopg_pool", "redis"}
    talking = {unit for unit in _graph() if _third_party(unit) & clients}
    assert talking <= {"storage"}
