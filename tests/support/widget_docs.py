"""The widget documentation an MCP documentation server serves in the tests."""

from __future__ import annotations

from typing import Any

#: A documentation question, its semantics, and the two documents the docs server holds (the
#: first answers it).
QUESTION = "How long does the widget cache keep entries?"
SEMANTICS: dict[str, Any] = {
    "query_kind": "documentation",
    "language": "en",
    "search_queries": ["widget cache entries"],
}
CACHE_DOC = {
    "title": "Configuring the widget cache",
    "text": "The widget cache keeps entries for 300 seconds by default. Set cache_ttl in "
    "widget.toml to change how long widget cache entries live.",
}
INSTALL_DOC = {"title": "Installing", "text": "Install the package with pip install widget."}
