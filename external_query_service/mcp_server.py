"""The MCP stdio server: the toolkit and the answer chain as MCP tools.

Tools (structured results): ``observe`` (state, tool contracts, artifact receipt,
``state_ref``), ``arguments`` (candidate ids for a toolkit tool's parameters, and
dependent ones given a parent choice), ``operate`` (run one toolkit tool with offered ids
and the current ``state_ref``), ``answer`` (the full external-evidence chain for a
question) and ``read_evidence`` (a bounded read of a stored capture). Calls run one at a
time; a stale, unknown or repeated ``state_ref`` is an MCP tool error naming the problem.

The ``mcp`` SDK (2.x) is an optional extra: it is imported only when a server is built,
and a missing SDK is an ``McpUnavailable`` error with the install command.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from ._version import __version__
from .errors import ExternalQueryError, InputError
from .service import ExternalQueryService
from .store import MAX_READ_CHARS
from .toolkit.operations import ToolkitSession

if TYPE_CHECKING:
    from mcp.server import MCPServer

__all__ = ["INSTALL_HINT", "McpUnavailable", "build_server", "serve_stdio"]

INSTALL_HINT = "pip install 'external_query_service[mcp]'"
SERVER_NAME = "external-query"
_T = TypeVar("_T")

_INSTRUCTIONS = (
    "Answers questions only from external evidence, and drives an evidence task step by "
    "step. Call observe for the state_ref, arguments for candidate ids, then operate with "
    "those ids and that state_ref; observe again after every operation."
)


class McpUnavailable(InputError):
    """The optional ``mcp`` package is not installed."""

    def __init__(self) -> None:
        super().__init__(f"the MCP server needs the optional 'mcp' package: {INSTALL_HINT}")


def build_server(session: ToolkitSession, service: ExternalQueryService) -> MCPServer:
    """An ``MCPServer`` exposing ``session`` and ``service`` (see the module docstring)."""
    try:
        from mcp.server import MCPServer
        from mcp.server.mcpserver.exceptions import ToolError
    except ImportError:
        raise McpUnavailable() from None

    server = MCPServer(SERVER_NAME, instructions=_INSTRUCTIONS, version=__version__)
    # One operation at a time, even if a client pipelines requests.
    lock = asyncio.Lock()

    async def guarded(call: Callable[[], Awaitable[_T]]) -> _T:
        async with lock:
            try:
                return await call()
            except ExternalQueryError as exc:
                raise ToolError(str(exc)) from None
            except KeyError as exc:  # the store's "unknown evidence reference"
                raise ToolError(str(exc.args[0]) if exc.args else "unknown reference") from None

    @server.tool()
    async def observe() -> dict[str, Any]:
        """The current state: task, tool contracts, captures, records, checks, artifact
        receipt, and the state_ref that arguments and operate need."""

        async def run() -> dict[str, Any]:
            return session.observe().model_dump(mode="json")

        return await guarded(run)

    @server.tool()
    async def arguments(
        tool: str, state_ref: str, parent: dict[str, str] | None = None, start: int = 0
    ) -> dict[str, Any]:
        """Candidate option ids for a toolkit tool's parameters under state_ref. Pass
        parent={"<parent parameter>": "<option id>"} to get a dependent parameter's
        candidates; start pages through long lists."""

        async def run() -> dict[str, Any]:
            return session.arguments(tool, state_ref, parent, start).model_dump(mode="json")

        return await guarded(run)

    @server.tool()
    async def operate(tool: str, arguments: dict[str, str], state_ref: str) -> dict[str, Any]:
        """Run one toolkit tool (web.open, web.links, web.follow, web.read_section,
        files.list, files.search, files.read, evidence.read, evidence.record, report.save)
        with option ids from arguments and the current state_ref (each state_ref admits
        one operation)."""

        async def run() -> dict[str, Any]:
            result = await session.operate(tool, arguments, state_ref)
            return result.model_dump(mode="json")

        return await guarded(run)

    @server.tool()
    async def answer(question: str, semantics: dict[str, Any] | None = None) -> dict[str, Any]:
        """Answer a question only from external evidence (optional query_semantics:
        query_kind, location, entities, compare_targets, time_range, ...). Returns the
        answer model: status, text, sources, evidence with (ref, offset, length)."""

        async def run() -> dict[str, Any]:
            found = await service.aanswer(question, semantics)
            return found.model_dump(mode="json")

        return await guarded(run)

    @server.tool()
    async def read_evidence(
        ref: str, offset: int = 0, limit: int = MAX_READ_CHARS
    ) -> dict[str, Any]:
        """At most 1,200 characters of a stored capture from offset; next_offset continues."""

        async def run() -> dict[str, Any]:
            if offset < 0 or limit < 0:
                raise InputError("offset and limit must not be negative")
            return session.store.window(ref, offset, limit).model_dump(mode="json")

        return await guarded(run)

    return server


async def serve_stdio(session: ToolkitSession, service: ExternalQueryService) -> None:
    """Serve one MCP session over stdin/stdout until the client closes it, then close the
    session's tools and the service's HTTP clients."""
    server = build_server(session, service)
    try:
        await server.run_stdio_async()
    finally:
        await session.aclose()
        await service.aclose()
