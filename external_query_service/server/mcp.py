"""The MCP stdio server: the toolkit and the answer chain as MCP tools.

Tools: ``observe`` (state, tool contracts, artifact receipt, ``state_ref``), ``arguments``
(candidate ids for a toolkit tool's parameters, and dependent ones given a parent choice),
``operate`` (run one toolkit tool with offered ids and the current ``state_ref``),
``run_task`` (hand the task to the configured model, which runs it within a budget),
``answer`` (the full external-evidence chain for a question) and ``read_evidence`` (a
bounded read of a stored capture). Calls run one at a time; a stale, unknown or repeated
``state_ref`` is an MCP tool error naming the problem. ``run_task`` exists only where
delegation is ready when the server is built (a task, a model, not ``direct_only``);
``delegate`` is the same tool under its older name: callable, but not listed (a middleware
drops it from ``tools/list``).

Every tool has a title, annotations (``readOnlyHint`` on all but ``operate``) and typed
parameters with descriptions: ``tool`` lists the toolkit's tool names, ``semantics`` is
``QuerySemantics`` with this server's query-kind vocabulary, ``limit`` stops at 1,200.
Results are structured (each tool's model, described by its ``outputSchema``); ``answer``'s
text content is the readable answer with its sources and status, its structured content
the full ``ExternalAnswer``. Serving keeps the SDK's and httpx's loggers at WARNING, so
stderr never lists the URLs a question fetched.

The ``mcp`` SDK (2.x) is an optional extra: it is imported only when a server is built,
and a missing SDK is an ``McpUnavailable`` error with the install command.
"""

# No ``from __future__ import annotations`` here: the SDK reads the tool signatures at
# runtime, and ``answer``'s semantics schema is built per server, inside ``build_server``.

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

from pydantic import Field, WithJsonSchema

from .._evidence_store import MAX_READ_CHARS, ReadWindow
from .._version import __version__
from ..errors import ExternalQueryError, McpUnavailable
from ..llm._client import json_schema_for
from ..models import ExternalAnswer, QuerySemantics
from ..service import ExternalQueryService
from ..toolkit._delegate import MAX_GOAL_CHARS, DelegationResult
from ..toolkit._operations import (
    MAX_OPTIONS,
    TOOL_NAMES,
    ArgumentsResult,
    Observation,
    OperationResult,
    ToolkitSession,
)

if TYPE_CHECKING:
    from mcp.server import MCPServer
    from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
    from mcp.types import ToolAnnotations

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

INSTALL_HINT = McpUnavailable.install_hint
SERVER_NAME = "external-query"
#: Loggers that would print request lines (the URL, query included) at INFO.
QUIET_LOGGERS = ("mcp", "httpx", "httpcore")
#: Evidence references listed in ``answer``'s text; the structured content holds all.
TEXT_EVIDENCE = 8
#: Callable but never listed: ``run_task`` under its older name.
HIDDEN_TOOLS = ("delegate",)
#: The most steps and seconds a ``run_task`` call may ask for (the task's rules may say less).
MAX_DELEGATED_STEPS = 500
MAX_DELEGATED_SECONDS = 3600
_T = TypeVar("_T")
_Fn = TypeVar("_Fn", bound=Callable[..., Any])

_INSTRUCTIONS = (
    "Answers questions only from external evidence, and drives an evidence task step by "
    "step. Call observe for the state_ref, arguments for candidate ids, then operate with "
    "those ids and that state_ref; observe again after every operation. Or, when observe "
    "says delegation is ready, call run_task once to let the configured model run the "
    "whole task; a session takes one of the two routes, never both."
)

_DESCRIPTIONS = {
    "observe": (
        "The current state: the task, the tool contracts this session offers, captures, "
        "records, checks, the artifact receipt, and the state_ref that arguments and "
        "operate need."
    ),
    "arguments": (
        "Candidate option ids for a toolkit tool's parameters under a state_ref. Pass "
        "parent to list a dependent parameter's candidates; start pages through long lists."
    ),
    "operate": (
        "Run one toolkit tool with option ids from arguments and the current state_ref. "
        "Each state_ref admits one operation; call observe again afterwards."
    ),
    "run_task": (
        "Hand this session's evidence task to the configured model: it chooses each step "
        "from the options on offer until the checks pass and the report is saved, it says it "
        "is done, or the budget (steps, seconds, tokens) runs out. Returns the terminal "
        "state: status, steps, report path and artifact (its receipt, also as receipt), why "
        "it stopped and the cost. Refused once the session has operated directly; a session "
        "delegates once."
    ),
    "delegate": "The older name of run_task; same arguments and result.",
    "answer": (
        "Answer a question only from external evidence (web search, fact APIs, "
        "documentation). The text is the answer with its sources and status; the structured "
        "content is the full answer model: plan, attempts, evidence (each with ref, offset "
        "and length for read_evidence), verifier checks and audit."
    ),
    "read_evidence": (
        f"Read at most {MAX_READ_CHARS:,} characters of a stored capture from offset; "
        "next_offset continues (null at the end of the text)."
    ),
}

#: What each ``QuerySemantics`` field means to a host; every field must have an entry. The
#: LangChain and LlamaIndex tools (``integrations/``) describe their arguments with it too.
SEMANTICS_FIELD_DESCRIPTIONS = {
    "query_kind": "What kind of question this is; it decides which sources are asked.",
    "answer_contract": (
        "direct_fact for one fact a source can state (a forecast, a rate), "
        "compare_with_sources when the question compares things, else summary_with_sources."
    ),
    "location": "The place the question is about, as written in the question.",
    "entities": (
        "The things the question is about (for exchange rates: ISO 4217 codes, base first)."
    ),
    "compare_targets": "The things compared, when the question compares.",
    "time_range": "The dates the question asks about, inclusive (YYYY-MM-DD).",
    "freshness_required": "True when the answer depends on current information.",
    "language": "The question's language code, such as zh or en.",
    "search_queries": "One to three web search queries, in the question's language.",
    "asked_value": (
        "event_date when the question asks when one event happened or will happen; "
        "sources giving different dates for it are then a disagreement."
    ),
}


def _tool_names(session: ToolkitSession) -> list[str]:
    """The ``tool`` enum: the built-in tools' advertised names, and the caller's tools of a
    task already built (a script builds on first use, so its own tools are listed by
    ``observe``). Older names are callable but never listed."""
    built = session.tool_names() if session.task_built else ()
    return list(dict.fromkeys((*TOOL_NAMES, *built)))


StateRef = Annotated[str, Field(description="The state_ref from the latest observe.")]


def _semantics_schema(kinds: Iterable[str]) -> dict[str, Any]:
    """The JSON schema of ``answer``'s ``semantics``: ``QuerySemantics``, every field
    optional and described, ``query_kind`` limited to ``kinds``."""
    schema = json_schema_for(QuerySemantics)
    del schema["required"]  # the host sets only what it knows
    schema["description"] = (
        "Optional: what the host already knows about the question. Each field given fixes "
        "that part of the plan; leave out what you do not know."
    )
    properties: dict[str, dict[str, Any]] = schema["properties"]
    properties["query_kind"] = {"type": ["string", "null"], "enum": [*kinds, None]}
    for name, field in properties.items():
        field["description"] = SEMANTICS_FIELD_DESCRIPTIONS[name]
    return schema


def _answer_text(found: ExternalAnswer) -> str:
    """``answer``'s text content: the presenter's answer (it lists its sources), the status,
    and where the first evidence sits for ``read_evidence``."""
    status = found.status + (f" ({found.reason})" if found.reason else "")
    lines = [found.text.rstrip(), "", f"status: {status} · contract: {found.answer_contract}"]
    placed = [item for item in found.evidence if item.ref is not None]
    if placed:
        shown = "; ".join(
            f"{item.ref} offset {item.offset} ({item.site})" for item in placed[:TEXT_EVIDENCE]
        )
        more = f"; {len(placed) - TEXT_EVIDENCE} more" if len(placed) > TEXT_EVIDENCE else ""
        lines.append(f"evidence for read_evidence: {shown}{more}")
    return "\n".join(lines)


async def _hide_unlisted(ctx: "ServerRequestContext[Any, Any]", call_next: "CallNext") -> Any:
    """Drop ``HIDDEN_TOOLS`` from ``tools/list`` (they stay callable by name)."""
    result: HandlerResult = await call_next(ctx)
    if ctx.method == "tools/list" and isinstance(result, dict):
        listed = result.get("tools")
        if isinstance(listed, list):
            result = result | {
                "tools": [tool for tool in listed if tool.get("name") not in HIDDEN_TOOLS]
            }
    return result


def build_server(
    session: ToolkitSession, service: ExternalQueryService, *, archive: Path | None = None
) -> "MCPServer":
    """An ``MCPServer`` exposing ``session`` and ``service`` (see the module docstring);
    ``archive`` receives a delegated run's steps, one JSON line each."""
    try:
        from mcp.server import MCPServer
        from mcp.server.mcpserver.exceptions import ToolError
    except ImportError:
        raise McpUnavailable() from None

    server = MCPServer(
        SERVER_NAME,
        instructions=_INSTRUCTIONS,
        version=__version__,
        log_level="WARNING",
        middleware=[_hide_unlisted],
    )
    tools = _Tools(server, ToolError)
    # The order tools are added in is the order tools/list gives them.
    _add_toolkit_tools(tools, session)
    # Listed only where it can run: a task, a model, and delegation not switched off.
    if session.delegation_status().ready:
        _add_run_task(tools, session, archive)
    _add_answer_tool(tools, service)
    _add_read_evidence(tools, session)
    return server


class _Tools:
    """What every tool shares: its title and description, structured output, and one lock,
    so calls run one at a time even if a client pipelines requests; a refusal of the
    package's (or an unknown reference) is an MCP tool error naming it."""

    def __init__(self, server: "MCPServer", tool_error: type[Exception]) -> None:
        self._server = server
        self._tool_error = tool_error
        self._lock = asyncio.Lock()

    def register(self, name: str, annotations: "ToolAnnotations") -> Callable[[_Fn], _Fn]:
        return self._server.tool(
            name=name,
            title=f"External query: {name}",
            description=_DESCRIPTIONS[name],
            annotations=annotations,
            structured_output=True,
        )

    async def guarded(self, call: Callable[[], Awaitable[_T]]) -> _T:
        async with self._lock:
            try:
                return await call()
            except ExternalQueryError as exc:
                raise self._tool_error(str(exc)) from None
            except KeyError as exc:  # the store's "unknown evidence reference"
                raise self._tool_error(
                    str(exc.args[0]) if exc.args else "unknown reference"
                ) from None


def _add_toolkit_tools(tools: _Tools, session: ToolkitSession) -> None:
    """``observe``, ``arguments`` and ``operate``: the toolkit driven step by step."""
    from mcp.types import ToolAnnotations

    ToolName = Annotated[
        str,
        Field(
            description="A toolkit tool; observe lists the ones this session offers.",
            json_schema_extra={"enum": _tool_names(session)},
        ),
    ]
    reading = ToolAnnotations(read_only_hint=True, open_world_hint=False)

    @tools.register("observe", reading)
    async def observe() -> Observation:
        async def run() -> Observation:
            return session.observe()

        return await tools.guarded(run)

    @tools.register("arguments", reading)
    async def arguments(
        tool: ToolName,
        state_ref: StateRef,
        parent: Annotated[
            dict[str, str] | None,
            Field(
                description='A parent choice, {"<parent parameter>": "<option id>"}, to list '
                "the candidates of the parameter that depends on it."
            ),
        ] = None,
        start: Annotated[
            int,
            Field(
                ge=0, description=f"The first candidate to list; at most {MAX_OPTIONS} per call."
            ),
        ] = 0,
    ) -> ArgumentsResult:
        async def run() -> ArgumentsResult:
            return session.arguments(tool, state_ref, parent, start)

        return await tools.guarded(run)

    @tools.register(
        "operate",
        ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=True),
    )
    async def operate(
        tool: ToolName,
        arguments: Annotated[
            dict[str, str],
            Field(
                description='Option ids from arguments, by parameter: {"<parameter>": '
                '"<option id>"}; {} for a tool without parameters.'
            ),
        ],
        state_ref: Annotated[
            str, Field(description="The state_ref from the latest observe; this call uses it up.")
        ],
    ) -> OperationResult:
        async def run() -> OperationResult:
            return await session.operate(tool, arguments, state_ref)

        return await tools.guarded(run)


def _add_run_task(tools: _Tools, session: ToolkitSession, archive: Path | None) -> None:
    """``run_task`` (and ``delegate``, its older name): the task handed to the model."""
    from mcp.types import ToolAnnotations

    async def run_task(
        goal: Annotated[
            str,
            Field(
                min_length=1,
                max_length=MAX_GOAL_CHARS,
                description="What the run is for, in a sentence or two; the task's checks "
                "still decide success.",
            ),
        ],
        max_steps: Annotated[
            int | None,
            Field(
                ge=1,
                le=MAX_DELEGATED_STEPS,
                description="The most operations the model may choose (default: the "
                "task's [delegation] max_steps).",
            ),
        ] = None,
        timeout_s: Annotated[
            float | None,
            Field(
                gt=0,
                le=MAX_DELEGATED_SECONDS,
                description="Seconds the run may take (default: the task's [delegation] "
                "timeout_s).",
            ),
        ] = None,
    ) -> DelegationResult:
        async def run() -> DelegationResult:
            return await session.delegate(
                goal, max_steps=max_steps, timeout_s=timeout_s, archive=archive
            )

        return await tools.guarded(run)

    delegating = ToolAnnotations(
        read_only_hint=False,
        destructive_hint=False,
        idempotent_hint=False,
        open_world_hint=True,
    )
    tools.register("run_task", delegating)(run_task)
    tools.register("delegate", delegating)(run_task)


def _add_answer_tool(tools: _Tools, service: ExternalQueryService) -> None:
    """``answer``: the full external-evidence chain; its semantics schema carries this
    service's query kinds."""
    from mcp.types import CallToolResult, TextContent, ToolAnnotations

    described_semantics = WithJsonSchema(_semantics_schema(service.query_kinds))

    @tools.register("answer", ToolAnnotations(read_only_hint=True, open_world_hint=True))
    async def answer(
        question: Annotated[str, Field(description="The question, as the user asked it.")],
        semantics: Annotated[Any, described_semantics] = None,
    ) -> Annotated[CallToolResult, ExternalAnswer]:
        async def run() -> CallToolResult:
            found = await service.aanswer(question, semantics)
            return CallToolResult(
                content=[TextContent(type="text", text=_answer_text(found))],
                structured_content=found.model_dump(mode="json"),
            )

        return await tools.guarded(run)


def _add_read_evidence(tools: _Tools, session: ToolkitSession) -> None:
    """``read_evidence``: a bounded read of a stored capture."""
    from mcp.types import ToolAnnotations

    @tools.register(
        "read_evidence",
        ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False),
    )
    async def read_evidence(
        ref: Annotated[
            str, Field(description="A capture reference: an evidence item's ref, or observe's.")
        ],
        offset: Annotated[
            int,
            Field(ge=0, description="Where to start, in characters (evidence gives its offset)."),
        ] = 0,
        limit: Annotated[
            int, Field(ge=1, le=MAX_READ_CHARS, description="The most characters to return.")
        ] = MAX_READ_CHARS,
    ) -> ReadWindow:
        async def run() -> ReadWindow:
            return session.store.window(ref, offset, limit)

        return await tools.guarded(run)


def _quiet_logging() -> None:
    """Keep the SDK's and the HTTP client's loggers at WARNING: at INFO they print every
    request line, and a request line holds the fetched URL with the question in it."""
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)


async def serve_stdio(
    session: ToolkitSession, service: ExternalQueryService, *, archive: Path | None = None
) -> None:
    """Serve one MCP session over stdin/stdout until the client closes it, then close the
    session's tools and the service's HTTP clients. Logs go to stderr at WARNING."""
    _quiet_logging()
    server = build_server(session, service, archive=archive)
    try:
        await server.run_stdio_async()
    finally:
        await session.aclose()
        await service.aclose()
