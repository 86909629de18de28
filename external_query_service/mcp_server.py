"""The MCP server's public import path; the server itself lives in ``server/mcp.py``,
beside the HTTP app."""

from .server.mcp import (
    HIDDEN_TOOLS,
    INSTALL_HINT,
    MAX_DELEGATED_SECONDS,
    MAX_DELEGATED_STEPS,
    QUIET_LOGGERS,
    SEMANTICS_FIELD_DESCRIPTIONS,
    SERVER_NAME,
    TEXT_EVIDENCE,
    McpUnavailable,
    build_server,
    serve_stdio,
)

__all__ = [
    "HIDDEN_TOOLS",
    "INSTALL_HINT",
    "MAX_DELEGATED_SECONDS",
    "MAX_DELEGATED_STEPS",
    "QUIET_LOGGERS",
    "SEMANTICS_FIELD_DESCRIPTIONS",
    "SERVER_NAME",
    "TEXT_EVIDENCE",
    "McpUnavailable",
    "build_server",
    "serve_stdio",
]
