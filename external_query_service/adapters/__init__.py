"""Built-in adapters. Each is registered like a third-party one (entry points)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .base import Adapter

__all__ = ["builtin_adapters"]


def builtin_adapters() -> dict[str, type[Adapter]]:
    """The adapter classes this package ships, by kind (imported on first call)."""
    from .brave import BraveAdapter
    from .frankfurter import FrankfurterAdapter
    from .local_docs import LocalDocsAdapter
    from .mcp_docs import McpDocsAdapter
    from .open_meteo import OpenMeteoAdapter
    from .searxng import SearxngAdapter
    from .tavily import TavilyAdapter

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
