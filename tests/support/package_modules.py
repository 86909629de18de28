"""Every module of the package, imported once: the walk the surface tests share."""

from __future__ import annotations

import functools
import importlib
import pkgutil
from types import ModuleType

import pytest

import external_query_service
from external_query_service.integrations._common import IntegrationUnavailable

#: What the optional extras' modules import (the server's, the PostgreSQL ledger's, the MCP
#: fixture server's): the walk imports every module, so without one of these it is skipped.
WALK_NEEDS = ("fastapi", "uvicorn", "prometheus_client", "psycopg", "mcp")


@functools.cache
def package_modules() -> tuple[ModuleType, ...]:
    """The package and every module under it, imported. ``__main__`` modules are left out:
    importing one runs the CLI. Skips the caller (a test, or a module that walks at import)
    where an optional extra the walk needs is not installed."""
    for name in WALK_NEEDS:
        pytest.importorskip(name)
    modules = [external_query_service]
    for info in pkgutil.walk_packages(
        external_query_service.__path__, f"{external_query_service.__name__}."
    ):
        if info.name.rsplit(".", 1)[-1] == "__main__":
            continue
        try:
            modules.append(importlib.import_module(info.name))
        except IntegrationUnavailable:
            # An integration whose framework is not installed here; the integrations run
            # (with the frameworks) walks it.
            continue
    return tuple(modules)
