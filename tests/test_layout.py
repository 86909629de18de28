"""The tests' own layout: they mirror the package, and what they share lives in tests/support/.

A test module takes shared helpers from ``tests/support/`` and shared fixtures from a
``conftest.py``, and imports neither another test module nor a ``conftest.py`` (which pytest
loads itself): the importer would carry the other module's import-time effects (its
``importorskip`` of an extra skips the importer too), a fixture taken that way is an import
nothing seems to use, and a reader looks for a helper among tests it has nothing to do with.
Code written into strings (a script a test runs in a subprocess, a plugin file it writes) is
held to the same rule.

A test file sits in the folder that mirrors the package folder of what it tests
(``tests/net/`` for ``external_query_service/net/``); behaviour suites across the pipeline sit
in ``end_to_end/``, the framework integrations (run apart, with the frameworks installed) in
``integrations/``; at the root are the tests of top-level modules and of the package as a
whole.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

import external_query_service
from tests.support.paths import REPO

TESTS = REPO / "tests"
PACKAGE = Path(external_query_service.__file__).parent
#: Test folders that mirror no package folder.
OWN_FOLDERS = frozenset({"end_to_end", "support", "integrations"})
#: Root test files about the package as a whole rather than one top-level module.
WHOLE_PACKAGE = frozenset(
    {
        "architecture",
        "docs",
        "layout",
        "no_outside_references",
        "one_helper_each",
        "public_api",
        "public_surface",
        "readme_evidence",
    }
)


def _package_of(relative: PurePosixPath) -> list[str]:
    """The dotted package a file under ``tests/`` belongs to (``tests/a/b.py``: tests.a)."""
    return ["tests", *relative.parts[:-1]]


def imported(source: str, package: list[str]) -> Iterator[str]:
    """Every dotted name ``source`` may import, relative imports resolved against ``package``;
    for ``from m import n`` both ``m`` and ``m.n`` (``n`` may be a module). String constants
    that parse as Python with an import in them are read the same way."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            yield module
            yield from (f"{module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if "import" not in node.value:
                continue
            try:
                yield from imported(node.value, package)
            except (SyntaxError, ValueError):  # prose, or not code at all
                continue


def owning_test_module(dotted: str) -> str | None:
    """The module pytest loads itself (a ``test_*`` module, or a ``conftest``) that ``dotted``
    is or is in."""
    parts = dotted.split(".")
    if parts[0] != "tests":
        return None
    found = next(
        (n for n, part in enumerate(parts) if part.startswith("test_") or part == "conftest"),
        None,
    )
    return None if found is None else ".".join(parts[: found + 1])


def imported_test_modules(path: Path) -> list[str]:
    """The test modules ``path`` (a file under ``tests/``) imports."""
    relative = PurePosixPath(path.relative_to(TESTS).as_posix())
    source = path.read_text(encoding="utf-8")
    found = (owning_test_module(name) for name in imported(source, _package_of(relative)))
    return sorted({name for name in found if name is not None})


def top_level_modules() -> set[str]:
    """The package's top-level modules, leading underscore dropped (``_wiring``: wiring)."""
    return {
        path.stem.lstrip("_") for path in PACKAGE.glob("*.py") if not path.stem.startswith("__")
    }


def misplaced(relative: PurePosixPath, modules: set[str]) -> bool:
    """Whether test file ``relative`` (to ``tests/``) sits where no rule puts it."""
    folders = relative.parts[:-1]
    if not folders:
        topic = relative.stem.removeprefix("test_")
        return topic not in WHOLE_PACKAGE and not any(
            topic == module or topic.startswith(f"{module}_") for module in modules
        )
    if folders[0] in OWN_FOLDERS:
        return False
    return not (PACKAGE.joinpath(*folders) / "__init__.py").is_file()


def test_the_import_check_sees_every_way_of_importing_a_test_module_or_conftest() -> None:
    package = ["tests", "toolkit"]
    # Written with placeholders, so that this file itself imports no test module.
    templates = [
        "from {tests}.toolkit.test_tasks import write",
        "from {tests}.storage import test_redis_cache as shared",
        "import {tests}.net.test_cache",
        "from {dot}test_delegate import pick",
        "from {dot}{dot} import test_settings",
        'SCRIPT = "from {tests}.gateway.test_registry import QuoteAdapter\\n"',
        "from {tests}.conftest import service_missing",
    ]
    forms = [template.format(tests="tests", dot=".") for template in templates]
    for form in forms:
        assert {owning_test_module(name) for name in imported(form, package)} - {None}, form
    fine = "from tests.support.toolkit_tasks import write\nfrom ..support import paths\n"
    assert {owning_test_module(name) for name in imported(fine, package)} == {None}


def test_no_file_of_the_tests_imports_a_test_module_or_conftest() -> None:
    found = {
        str(path.relative_to(TESTS)): names
        for path in sorted(TESTS.rglob("*.py"))
        if (names := imported_test_modules(path))
    }
    assert found == {}


def test_the_place_check_refuses_a_test_file_no_rule_puts_there() -> None:
    modules = top_level_modules()
    assert not misplaced(PurePosixPath("net/test_cache.py"), modules)
    assert not misplaced(PurePosixPath("test_service_overload.py"), modules)
    assert not misplaced(PurePosixPath("test_wiring.py"), modules)
    assert not misplaced(PurePosixPath("end_to_end/test_answers.py"), modules)
    assert misplaced(PurePosixPath("test_fetch.py"), modules)  # net/_fetch.py: tests/net/
    assert misplaced(PurePosixPath("helpers/test_cache.py"), modules)
    assert misplaced(PurePosixPath("net/cache/test_rules.py"), modules)


def test_every_test_file_sits_in_a_folder_that_mirrors_the_package() -> None:
    modules = top_level_modules()
    files = [
        PurePosixPath(path.relative_to(TESTS).as_posix())
        for path in sorted(TESTS.rglob("test_*.py"))
    ]
    assert len(files) > 100  # the walk found the suite
    assert [str(path) for path in files if misplaced(path, modules)] == []


def test_helpers_live_in_tests_support() -> None:
    """Besides test files, ``conftest.py`` and ``__init__.py``, a module of the tests is a
    shared helper and lives in ``tests/support/`` (``integrations/`` keeps its own: that
    suite runs apart, with the frameworks installed)."""
    kept = {"conftest.py", "__init__.py"}
    helpers = [
        str(path.relative_to(TESTS))
        for path in sorted(TESTS.rglob("*.py"))
        if not path.name.startswith("test_") and path.name not in kept
    ]
    elsewhere = [name for name in helpers if Path(name).parts[0] not in {"support", "integrations"}]
    assert helpers  # the support modules are there
    assert elsewhere == []
