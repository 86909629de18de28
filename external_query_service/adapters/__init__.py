"""Built-in adapters. Each is registered like a third-party one (entry points)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._base import Adapter

__all__ = ["builtin_adapters"]


def builtin_adapters() -> dict[str, type[Adapter]]:
    """The adapter classes this package ships, by kind (imported on first call)."""
    from ._brave import BraveAdapter
    from ._frankfurter import FrankfurterAdapter
    from ._local_docs import LocalDocsAdapter
    from ._mcp_docs import McpDocsAdapter
    from ._open_meteo import OpenMeteoAdapter
    from ._searxng import SearxngAdapter
    from ._tavily import TavilyAdapter

    classes: tuple[type[Adapter], ...] = (
        SearxngAdapter,
        OpenMeteoAdapter,
        FrankfurterAdapter,
        LocalDocsAdapter,
        McpDocsAdapter,
        BraveAdapter,
        TavilyAdapter,
    )
    return {cls.kind: cls for cls in classes}
