"""The package's shape: no import cycles, a small public top level, each folder keeps its rule.

Two graphs are checked: one whose units are the package's folders and top-level modules, and
one whose units are single modules (so no two modules inside a folder import each other).
Every ``from``/``import`` counts, including those under ``TYPE_CHECKING`` and inside
functions: a cycle hidden in a function or an annotation is still a cycle a reader has to hold
in their head, and a plain import graph (one that cannot tell a type-only import from another)
draws it too.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import external_query_service

PACKAGE = "external_query_service"
ROOT = Path(external_query_service.__file__).parent


def _imports(path: Path) -> Iterator[str]:
    """Absolute dotted names of what ``path`` imports from this package or outside it."""
    relative = path.relative_to(ROOT.parent).with_suffix("")
    package = list(relative.parts[:-1])
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
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


def _module_name(path: Path) -> str:
    relative = path.relative_to(ROOT.parent).with_suffix("")
    parts = relative.parts[:-1] if relative.name == "__init__" else relative.parts
    return ".".join(parts)


def _module_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports. A package's ``__init__`` re-exports its
    modules, so importing a name through the package counts as importing the package only."""
    paths = sorted(ROOT.rglob("*.py"))
    known = {_module_name(path) for path in paths}
    graph: dict[str, set[str]] = {}
    for path in paths:
        source = _module_name(path)
        if source == PACKAGE:
            continue  # the package root re-exports everything, lazily
        edges = graph.setdefault(source, set())
        for name in _imports(path):
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name.startswith(PACKAGE + ".") and name != source:
                edges.add(name)
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


def test_no_import_cycle_between_any_two_modules() -> None:
    graph = _module_graph()
    assert f"{PACKAGE}._clock" in graph[f"{PACKAGE}.net._cache"]
    # A package importing its own modules (its __init__ re-exporting them) is not a cycle
    # a reader has to follow; drop those edges, keep every other.
    acyclic = {
        module: {
            target
            for target in targets
            if not (target.startswith(module + ".") or module.startswith(target + "."))
        }
        for module, targets in graph.items()
    }
    assert _cycles(acyclic) == []


#: The public top-level modules: the pipeline's vocabulary. Everything else lives in a
#: folder or carries a leading underscore.
PUBLIC_TOP_LEVEL = {
    "__init__",
    "errors",
    "mcp_server",
    "models",
    "service",
    "settings",
    "stages",
}


def test_the_top_level_is_the_pipeline_vocabulary() -> None:
    modules = {path.stem for path in ROOT.glob("*.py") if not path.stem.startswith("_")}
    assert modules | {"__init__"} == PUBLIC_TOP_LEVEL
    folders = {path.name for path in ROOT.iterdir() if (path / "__init__.py").is_file()}
    assert {"planner", "gateway", "verifier", "presenter", "execution", "net", "text"} <= folders


#: Modules inside folders that are public by their own import path (what the docs show a user
#: importing, an entry point, a module a host's suite imports). Every other module inside a
#: folder carries a leading underscore; its folder's ``__init__`` exports what it offers.
PUBLIC_IN_FOLDERS = {
    "adapters.options",
    "integrations.langchain",
    "integrations.llamaindex",
    "server.mcp",
    "testing.content",
    "testing.pytest_plugin",
    "testing.server",
    "testing.world",
    "testing.world_files",
}
#: Folders whose module names are a public vocabulary of their own: each CLI command is the
#: module of its name (``ask.py`` is ``external-query ask``).
NAMED_BY_MODULE = {"cli"}


def test_modules_inside_folders_are_private_unless_public_by_path() -> None:
    public = {
        f"{path.parent.name}.{path.stem}"
        for path in ROOT.glob("*/*.py")
        if not path.stem.startswith("_") and path.parent.name not in NAMED_BY_MODULE
    }
    assert public == PUBLIC_IN_FOLDERS


def _third_party(unit: str) -> set[str]:
    folder = ROOT / unit
    paths = folder.rglob("*.py") if folder.is_dir() else [ROOT / f"{unit}.py"]
    return {name.split(".")[0] for path in paths for name in _imports(path)}


def test_errors_imports_nothing_of_the_package_not_even_for_annotations() -> None:
    assert _graph()["errors"] == set()


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


#: The most lines one function of the entry points (``server/``, ``cli/``) may span, nested
#: functions included: a route, a tool or a command is registered by a named function a
#: reader can find, not by a closure inside a screen-long builder.
MAX_ENTRY_POINT_FUNCTION_LINES = 80


def _long_functions(folder: str, limit: int) -> list[str]:
    """``path:line name (lines)`` for every function in ``folder`` longer than ``limit``."""
    found = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > limit:
                    where = path.relative_to(ROOT)
                    found.append(f"{where}:{node.lineno} {node.name} ({lines} lines)")
    return found


def test_the_long_function_finder_counts_nested_functions() -> None:
    assert _long_functions("server", 0)  # every function is longer than no line
    assert any(" register (" in found for found in _long_functions("cli", 0))


def test_no_function_in_the_server_or_the_cli_spans_more_than_80_lines() -> None:
    limit = MAX_ENTRY_POINT_FUNCTION_LINES
    assert _long_functions("server", limit) + _long_functions("cli", limit) == []


def test_a_plain_module_graph_counting_every_import_has_no_circle() -> None:
    """The graph as any import-graph tool draws it: every import an edge, type-only ones and
    a package's imports of its own modules included."""
    assert _cycles(_module_graph()) == []


def _folder_groups(text: str, marker: str, named: str = r"`+(\w+)/`+") -> list[set[str]]:
    """The folders ``named`` in each part of ``text`` that starts with ``marker`` at the
    start of a line (by default every ``name/`` in backticks)."""
    parts = re.split(rf"^{re.escape(marker)}", text, flags=re.MULTILINE)[1:]
    return [set(re.findall(named, part, flags=re.MULTILINE)) for part in parts]


def test_the_package_docstring_places_every_folder_in_exactly_one_group() -> None:
    folders = {path.name for path in ROOT.iterdir() if (path / "__init__.py").is_file()}
    groups = _folder_groups(external_query_service.__doc__ or "", "- ")
    assert len(groups) == 4  # the pipeline, infrastructure, the second product, the ways in
    assert sorted(folder for group in groups for folder in group) == sorted(folders)


def test_the_code_index_groups_the_folders_as_the_package_docstring_does() -> None:
    index = (ROOT.parent / "docs" / "architecture" / "CODE_REFERENCE_INDEX.md").read_text("utf-8")
    folders_part = index.partition("## Folders")[2]
    # A table row's first cell is its folder; the other cells may name other folders.
    assert _folder_groups(folders_part, "### ", r"^\| `(\w+)/`") == _folder_groups(
        external_query_service.__doc__ or "", "- "
    )


def test_the_service_assembles_the_stages_and_its_run_fits_one_screen() -> None:
    source = (ROOT / "service.py").read_text(encoding="utf-8")
    assert len(source.splitlines()) < 480
    tree = ast.parse(source)
    [run] = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.AsyncFunctionDef) and node.name == "_run"
    ]
    assert (run.end_lineno or run.lineno) - run.lineno + 1 <= 40
    # The service writes no verifier or presenter audit field itself: their results do.
    writes = [
        node.args[0].value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "record"
        and node.args
        and isinstance(node.args[0], ast.Constant)
    ]
    assert set(writes) <= {"service"}
