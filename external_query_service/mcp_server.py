"""The MCP server's public import path: every name of ``server/mcp.py``, the server itself."""

from .server.mcp import *  # noqa: F403  # exactly the names in its __all__
