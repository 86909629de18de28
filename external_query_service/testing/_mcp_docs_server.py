"""A small MCP documentation server over stdio, for test worlds: ``python _mcp_docs_server.py
<spec.json>``.

It serves one tool (``spec["tool"]``, default ``search_docs``) and answers each call from the
spec file, read afresh on every call so a test can change it between questions:

- ``calls``: recorded calls, ``{"arguments": {...}, "result": {...}}`` (a ``CallToolResult``
  as JSON) or ``{"arguments": {...}, "fault": "hang"|"reset"|"oversized"}``; a call whose
  arguments equal a recorded call's gets its answer;
- ``fault`` (any other call): ``hang`` never answers, ``reset`` exits the process at once,
  ``oversized`` answers 4 MiB of text, ``tool_error`` answers a tool error;
- ``documents``: ``[{"title", "text", "url"?}]`` searched by the argument ``query_argument``
  names (default ``query``): documents sharing words (or, in Chinese, two-character runs)
  with it, best first, as structured content ``{"results": [...]}`` and as JSON text.

``pid_file`` (optional) receives the process id at start. ``input_schema`` (optional)
replaces the tool's input schema, which otherwise declares the query argument as a string.

The script imports only the standard library and the ``mcp`` SDK, so it runs with any
interpreter that has the SDK, whatever the environment the client passes it.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

__all__ = ["OVERSIZED_CHARS", "build", "main"]

OVERSIZED_CHARS = 4 * 1024 * 1024
_WORD = re.compile(r"[A-Za-z0-9]+|[\u3400-\u9fff]+")


def _terms(text: str) -> set[str]:
    terms: set[str] = set()
    for run in _WORD.findall(text.lower()):
        if run.isascii():
            if len(run) > 1:
                terms.add(run)
        else:
            terms.update(run[i : i + 2] for i in range(max(len(run) - 1, 1)))
    return terms


def _search(documents: list[dict[str, Any]], query: str, limit: int = 5) -> list[dict[str, Any]]:
    wanted = _terms(query)
    scored = []
    for index, document in enumerate(documents):
        text = f"{document.get('title', '')}\n{document.get('text', '')}"
        overlap = len(wanted & _terms(text))
        if overlap:
            scored.append((-overlap, index, document))
    return [document for _, _, document in sorted(scored)[:limit]]


def _text_result(text: str, *, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=error)


async def _fault(kind: str) -> types.CallToolResult:
    if kind == "hang":
        await anyio.sleep_forever()
    if kind == "reset":
        os._exit(3)
    if kind == "oversized":
        return _text_result("x" * OVERSIZED_CHARS)
    return _text_result("the documentation backend failed", error=True)


def build(spec_path: Path) -> Server[Any]:
    """The stdio MCP server serving the documents of a folder through one search tool."""

    def spec() -> dict[str, Any]:
        data: dict[str, Any] = json.loads(spec_path.read_text(encoding="utf-8"))
        return data

    async def list_tools(
        _ctx: Any, _params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        current = spec()
        argument = current.get("query_argument", "query")
        schema = current.get("input_schema") or {
            "type": "object",
            "properties": {argument: {"type": "string"}},
            "required": [argument],
        }
        tool = types.Tool(
            name=current.get("tool", "search_docs"),
            description="Search the documentation.",
            input_schema=schema,
        )
        return types.ListToolsResult(tools=[tool])

    async def call_tool(_ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        current = spec()
        arguments = params.arguments or {}
        for call in current.get("calls", ()):
            if call.get("arguments") == arguments:
                if call.get("fault"):
                    return await _fault(call["fault"])
                return types.CallToolResult.model_validate(call["result"], by_alias=True)
        if current.get("fault"):
            return await _fault(current["fault"])
        query = str(arguments.get(current.get("query_argument", "query"), ""))
        found = _search(list(current.get("documents", ())), query)
        structured = {"results": found}
        return types.CallToolResult(
            content=[
                types.TextContent(type="text", text=json.dumps(structured, ensure_ascii=False))
            ],
            structured_content=structured,
        )

    return Server("docs-world", on_list_tools=list_tools, on_call_tool=call_tool)


async def _serve(spec_path: Path) -> None:
    server = build(spec_path)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def main() -> None:
    """Run the server over stdio (the world starts this as a subprocess)."""
    spec_path = Path(sys.argv[1])
    pid_file = json.loads(spec_path.read_text(encoding="utf-8")).get("pid_file")
    if pid_file:
        Path(pid_file).write_text(str(os.getpid()), encoding="utf-8")
    anyio.run(_serve, spec_path)


if __name__ == "__main__":
    main()
