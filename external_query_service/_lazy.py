"""Lazy package exports (PEP 562): a package names what it exports and where it lives, and
each name is imported on first access.

Importing the package itself then costs next to nothing — an unrelated pytest run that loads
our plugin, or a CLI that only prints ``--help``, never pays for trafilatura, lxml, jinja2 or
httpx. Type checkers still see every name through the package's ``TYPE_CHECKING`` imports.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``, whose ``exports`` map each public
    name to the relative module that defines it (``{"Settings": ".settings"}``)."""
    namespace = importlib.import_module(package).__dict__

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        namespace[name] = value  # later lookups skip this function
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__
