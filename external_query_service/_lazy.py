"""Lazy package exports (PEP 562): a package names what it exports and where it lives, and
each name is imported on first access.

Importing the package itself then costs next to nothing — an unrelated pytest run that loads
our plugin, or a CLI that only prints ``--help``, never pays for trafilatura, lxml, jinja2 or
httpx. Type checkers still see every name through the package's ``TYPE_CHECKING`` imports.

A package may write its exports once, as those imports (``declared_exports``): each
``from .module import Name as Name`` under ``if TYPE_CHECKING:`` is what a type checker
re-exports, and the same line gives the lazy table its name and module.
"""

from __future__ import annotations

import ast
import importlib
import sys
import warnings
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["declared_exports", "lazy_exports", "renamed"]


def lazy_exports(
    package: str, exports: Mapping[str, str], *, old_names: Mapping[str, str] | None = None
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``, whose ``exports`` map each public
    name to the relative module that defines it (``{"Settings": ".settings"}``).
    ``old_names`` maps names kept for one release to their new names (see ``renamed``)."""
    namespace = importlib.import_module(package).__dict__
    deprecated = renamed(package, old_names or {})

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            return deprecated(name)
        value = getattr(importlib.import_module(module, package), name)
        namespace[name] = value  # later lookups skip this function
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__


def renamed(module: str, old_names: Mapping[str, str]) -> Callable[[str], Any]:
    """A ``__getattr__`` for ``module`` that still answers each old name in ``old_names``
    (old name → new name) with the new name's object, warning with a ``DeprecationWarning``
    on every use; any other name is an ``AttributeError``."""

    def __getattr__(name: str) -> Any:
        new = old_names.get(name)
        if new is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        warnings.warn(
            f"{module}.{name} is deprecated and will be removed; use {new}",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(sys.modules[module], new)

    return __getattr__


def declared_exports(package: str) -> dict[str, str]:
    """Each name ``package`` re-exports for type checkers, and the relative module it comes
    from: the ``from .module import Name as Name`` imports under the package's top-level
    ``if TYPE_CHECKING:``, read from its source (the ``as`` is what makes a strict type
    checker treat the name as exported; an import without it only serves annotations and is
    not an export)."""
    spec = importlib.import_module(package).__spec__
    assert spec is not None  # a module being imported has one
    # No importlib.abc or pathlib here: importing them would nearly double the package's
    # own import time.
    get_source = getattr(spec.loader, "get_source", None)
    source: str | None
    if spec.has_location and spec.origin is not None and spec.origin.endswith(".py"):
        # Read the file itself: the loader may be an import hook that cannot give source
        # (pytest's assertion rewriter loads this package when its plugin is registered).
        with open(spec.origin, encoding="utf-8") as file:
            source = file.read()
    elif callable(get_source):
        source = get_source(package)
    else:
        source = None
    if source is None:
        raise ImportError(f"{package}: its exports are read from its source, which is missing")
    exports: dict[str, str] = {}
    for statement in ast.parse(source).body:
        if not (
            isinstance(statement, ast.If)
            and isinstance(statement.test, ast.Name)
            and statement.test.id == "TYPE_CHECKING"
        ):
            continue
        for node in statement.body:
            if isinstance(node, ast.ImportFrom) and node.level:
                where = "." * node.level + (node.module or "")
                for alias in node.names:
                    if alias.asname == alias.name:
                        exports[alias.name] = where
    return exports
