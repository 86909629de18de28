"""Documentation from an MCP server (doc_search): call one of its tools, score what it returns.

The adapter is an MCP *client* (the official SDK, the optional ``[mcp]`` extra). It starts
the configured server (``command``) over stdio once per service and event loop, keeps it for
later questions, and starts it again after it failed (crashed, hung); ``close()`` of the
service stops it. The server gets the SDK's minimal environment plus the variables ``env``
names (names only: values are read from this process's environment at start), and its
stderr is discarded (it may echo what it was asked).

Per planned query the tool named ``tool`` is called with ``arguments``, every string in
which has ``{query}`` replaced by the query. A result's items are its structured content's
``results`` list (or a bare list), each with ``title``, ``text`` or ``content``, and an
optional ``url``; else its text content is one item. Items with an http(s) URL are search
hits: their pages go through the page-body chain (``harvest_pages``) under the network and
source policies, as a search adapter's pages. Items carrying text are chunked and scored
directly (``doc_body`` evidence at ``docs://<adapter id>/<tool>/<n>``).

A failed call fails the attempt with a reason and a failure class, and the gateway fails
over: the SDK missing or the server not starting (``server_start_failed``) and a tool the
server refuses (``tool_refused``) or whose result breaks the protocol (``invalid_result``)
are ``misconfigured``; a hang (``deadline_exceeded``, the server is restarted), a crash
(``server_closed``), a tool error (``tool_error``) and an answer over
``network.max_page_bytes`` (``content_too_large``) are ``transient``.

Streamable HTTP is not offered: the SDK's HTTP transport runs on its own HTTP library
(``httpx2``), which has no hook for the connect-time address checks every other outside call
here goes through (``net/``), so an HTTP server URL could reach addresses the network policy
refuses. A server reachable only over HTTP can be bridged to stdio by a local proxy command.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import quote

from pydantic import Field, JsonValue, field_validator

from .._digests import sha256_digest
from ..errors import ExternalQueryError
from ..models import Evidence, ExternalQueryPlan, FailureClass, ProviderType, Readiness
from ..text._score import MIN_SCORE
from ._base import Adapter, AdapterOutcome, ToolCall
from ._pages import DEADLINE_MARGIN_S, SearchHit, gather_deadline, harvest_pages
from ._search_api import MAX_QUERIES
from ._text_evidence import TextItem, text_evidence
from .options import Endpoints

if TYPE_CHECKING:
    from mcp import Client
    from mcp.types import CallToolResult

__all__ = [
    "MAX_ITEMS",
    "MAX_LIST_PAGES",
    "QUERY_FIELD",
    "McpDocsAdapter",
    "fill_arguments",
]

log = logging.getLogger("external_query_service.adapters")

QUERY_FIELD = "{query}"
#: Tool listing pages read when looking for the tool (a server that never stops paging
#: cannot hang a probe).
MAX_LIST_PAGES = 20
#: Text items kept per call, in the server's order.
MAX_ITEMS = 50


class _McpFailure(ExternalQueryError):
    """A tool call that did not produce a usable result: ``reason`` and failure class."""

    def __init__(self, reason: str, failure: FailureClass, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.failure = failure
        self.detail = detail


def fill_arguments(template: JsonValue, query: str) -> JsonValue:
    """``template`` with ``{query}`` replaced by ``query`` in every string, at any depth
    (plain replacement: no other braces are interpreted)."""
    if isinstance(template, str):
        return template.replace(QUERY_FIELD, query)
    if isinstance(template, list):
        return [fill_arguments(item, query) for item in template]
    if isinstance(template, dict):
        return {key: fill_arguments(value, query) for key, value in template.items()}
    return template


def _default_arguments() -> dict[str, JsonValue]:
    return {"query": QUERY_FIELD}


def _mentions_query(template: JsonValue) -> bool:
    if isinstance(template, str):
        return QUERY_FIELD in template
    if isinstance(template, list):
        return any(_mentions_query(item) for item in template)
    if isinstance(template, dict):
        return any(_mentions_query(value) for value in template.values())
    return False


@dataclass
class _Server:
    """One server process and the SDK client connected to it, owned by one task.

    The SDK's client is a context manager whose task groups must be left by the task that
    entered them, so a dedicated task enters it, hands the client out, and leaves it when
    ``stop()`` is called (or when it is cancelled: the SDK then still ends the process).
    """

    command: tuple[str, ...]
    env: dict[str, str]
    cwd: Path | None
    _stop: asyncio.Event = field(default_factory=asyncio.Event)
    _task: asyncio.Task[None] | None = None

    async def start(self, timeout: float) -> Client:
        ready: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._own(ready), name="mcp-docs-server")
        try:
            return await asyncio.wait_for(asyncio.shield(ready), timeout)
        except TimeoutError:
            await self.stop()
            raise _McpFailure("server_start_timeout", "transient") from None

    async def _own(self, ready: asyncio.Future[Client]) -> None:
        from mcp import Client, StdioServerParameters
        from mcp.client.stdio import stdio_client

        params = StdioServerParameters(
            command=self.command[0],
            args=list(self.command[1:]),
            env=self.env,
            cwd=self.cwd,
        )
        try:
            with open(os.devnull, "w", encoding="utf-8") as errlog:
                async with Client(stdio_client(params, errlog=errlog), cache=None) as client:
                    if not ready.done():
                        ready.set_result(client)
                    await self._stop.wait()
        except Exception as exc:
            if not ready.done():
                ready.set_exception(exc)
            else:
                log.debug("MCP server connection ended: %s", type(exc).__name__)

    async def stop(self) -> None:
        """Leave the client (the SDK closes stdin, then ends the process tree)."""
        self._stop.set()
        if self._task is not None:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await self._task


@dataclass
class _LoopState:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    server: _Server | None = None
    client: Client | None = None
    stopping: set[asyncio.Task[None]] = field(default_factory=set)


@dataclass(frozen=True)
class _Item:
    title: str
    text: str
    url: str


class McpDocsAdapter(Adapter):
    """Documentation evidence from a tool of an MCP server (``[[adapters]] kind = "mcp_docs"``)."""

    kind: ClassVar[str] = "mcp_docs"
    provider_type: ClassVar[ProviderType] = "doc_search"
    supported_query_kinds: ClassVar[tuple[str, ...]] = ("documentation",)

    class Options(Adapter.Options):
        #: The server's command line (program and arguments). Unset: not ready.
        command: tuple[str, ...] | None = Field(default=None, min_length=1)
        #: Names of environment variables passed to the server (never their values here).
        env: tuple[str, ...] = ()
        #: The server's working folder (relative: to the settings file's folder).
        cwd: Path | None = None
        #: The tool to call.
        tool: str = Field(min_length=1)
        #: The tool's arguments; ``{query}`` in any string becomes the search query.
        arguments: dict[str, JsonValue] = Field(default_factory=_default_arguments)
        #: Seconds one call may take (default: ``network.timeout_s``), within the deadline.
        timeout_s: float | None = Field(default=None, gt=0)

        @field_validator("env")
        @classmethod
        def _names(cls, value: tuple[str, ...]) -> tuple[str, ...]:
            bad = [name for name in value if not (name.isascii() and name.isidentifier())]
            if bad:
                raise ValueError(f"env lists variable names, not {bad[0]!r}")
            return value

        @field_validator("arguments")
        @classmethod
        def _has_query(cls, value: dict[str, JsonValue]) -> dict[str, JsonValue]:
            if not _mentions_query(value):
                raise ValueError(
                    "no argument holds {query}: the question would never reach the tool"
                )
            return value

        def endpoints(self) -> Endpoints:
            return Endpoints(stdio="command", keep=("tool", "arguments"))

    options: Options

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._loops: dict[asyncio.AbstractEventLoop, _LoopState] = {}

    # -- readiness ----------------------------------------------------------------------
    def readiness(self) -> Readiness:
        static = super().readiness()
        if not static.ready:
            return static
        if not self.options.command:
            return Readiness(ready=False, reason="command_missing")
        if importlib.util.find_spec("mcp") is None:
            return Readiness(ready=False, reason="mcp_sdk_missing")
        return Readiness(ready=True)

    async def probe(self) -> Readiness:
        """The server starts, lists the tool, and the filled arguments fit its input schema."""
        static = self.readiness()
        if not static.ready:
            return static
        try:
            client = await self._client()
            tool = await self._find_tool(client)
        except _McpFailure as exc:
            return Readiness(ready=False, reason=exc.reason)
        if tool is None:
            return Readiness(ready=False, reason="tool_missing")
        problem = _schema_problem(
            tool.input_schema, fill_arguments(self.options.arguments, "probe")
        )
        if problem is not None:
            log.info("adapter %s: arguments do not fit %s: %s", self.adapter_id, tool.name, problem)
            return Readiness(ready=False, reason="arguments_invalid")
        return Readiness(ready=True)

    # -- gather -------------------------------------------------------------------------
    async def gather(self, plan: ExternalQueryPlan) -> AdapterOutcome:
        ready = self.readiness()
        if not ready.ready:
            return AdapterOutcome(status="failed", reason=ready.reason, failure="misconfigured")
        texts: list[tuple[_Item, str]] = []
        hits: list[SearchHit] = []
        try:
            client = await self._client()
            for query in plan.search_queries[:MAX_QUERIES]:
                result, digest = await self._call(client, query)
                for item in _items(result)[:MAX_ITEMS]:
                    if item.url.startswith(("http://", "https://")):
                        hits.append(SearchHit(item.url, item.title, item.text, None, query, digest))
                    elif item.text.strip():
                        texts.append((item, query))
        except _McpFailure as exc:
            return AdapterOutcome(
                status="failed",
                reason=exc.reason,
                failure=exc.failure,
                detail={
                    "tool": self.options.tool,
                    **({"detail": exc.detail} if exc.detail else {}),
                },
            )
        evidence = self._documents(texts, plan)
        harvest = await harvest_pages(
            hits,
            plan,
            adapter_id=self.adapter_id,
            # Pages named by the server are web pages: judged like a search adapter's.
            provider_type="live_search",
            runtime=self.runtime,
        )
        found = (*evidence, *harvest.evidence)
        return harvest.outcome(
            found,
            results=len(texts) + len(hits),
            empty_reason="no_match",
            tool=self.options.tool,
            documents=len(texts),
        )

    def _documents(
        self, texts: Sequence[tuple[_Item, str]], plan: ExternalQueryPlan
    ) -> list[Evidence]:
        """``doc_body`` evidence, numbering distinct documents in the order first seen."""
        numbers: dict[str, int] = {}
        evidence: list[Evidence] = []
        seen: set[str] = set()
        for item, query in texts:
            key = sha256_digest(f"{item.title}\n{item.text}")
            number = numbers.setdefault(key, len(numbers) + 1)
            url = (
                f"docs://{quote(self.adapter_id, safe='')}/"
                f"{quote(self.options.tool, safe='')}/{number}"
            )
            metadata = {"adapter_id": self.adapter_id, "kind": self.kind, "tool": self.options.tool}
            if item.url:
                metadata["source"] = item.url
            for found in text_evidence(
                TextItem(
                    url=url,
                    title=item.title or f"{self.options.tool} #{number}",
                    text=item.text,
                    query=query,
                ),
                plan,
                adapter_id=self.adapter_id,
                provider_type=self.provider_type,
                basis="doc_body",
                site=self.adapter_id,
                runtime=self.runtime,
                min_score=MIN_SCORE,
                metadata=metadata,
            ):
                if found.evidence_id not in seen:
                    seen.add(found.evidence_id)
                    evidence.append(found)
        return evidence

    # -- the server -----------------------------------------------------------------------
    def _state(self) -> _LoopState:
        loop = asyncio.get_running_loop()
        for gone in [other for other in self._loops if other.is_closed()]:
            del self._loops[gone]
        state = self._loops.get(loop)
        if state is None:
            state = self._loops[loop] = _LoopState()
        return state

    def _timeout(self, *, starting: bool = False) -> float:
        """Seconds a call may take: the option (or the network timeout), within the deadline.
        Starting a server (a process, an interpreter and its SDK: seconds on a busy machine)
        may take the whole question's deadline: it happens once per service."""
        limit = self.options.timeout_s or self.runtime.network.timeout_s
        if starting:
            limit = self.runtime.network.deadline_s
        deadline = gather_deadline.get()
        if deadline is not None:
            left = deadline - asyncio.get_running_loop().time() - DEADLINE_MARGIN_S
            limit = min(limit, max(left, 0.05))
        return limit

    async def _client(self) -> Client:
        """The connected client, starting the server when none runs on this loop."""
        state = self._state()
        async with state.lock:
            if state.client is not None:
                return state.client
            assert self.options.command
            names = self.options.env
            server = _Server(
                command=self.options.command,
                env={name: os.environ[name] for name in names if name in os.environ},
                cwd=self.options.cwd,
            )
            try:
                client = await server.start(self._timeout(starting=True))
            except _McpFailure:
                raise
            except Exception as exc:  # spawn refused, handshake broken: never a crash
                raise _McpFailure(
                    "server_start_failed", "misconfigured", type(exc).__name__
                ) from None
            state.server, state.client = server, client
            return client

    def _drop(self) -> None:
        """Forget this loop's server and stop it in the background (restarted on next use)."""
        state = self._state()
        server, state.server, state.client = state.server, None, None
        if server is not None:
            task = asyncio.create_task(server.stop())
            state.stopping.add(task)
            task.add_done_callback(state.stopping.discard)

    async def _find_tool(self, client: Client) -> Any:
        from mcp.shared.exceptions import MCPError

        cursor: str | None = None
        try:
            for _ in range(MAX_LIST_PAGES):
                page = await asyncio.wait_for(client.list_tools(cursor=cursor), self._timeout())
                found = next((tool for tool in page.tools if tool.name == self.options.tool), None)
                cursor = page.next_cursor
                if found is not None or cursor is None:
                    return found
        except TimeoutError:
            self._drop()
            raise _McpFailure("deadline_exceeded", "transient") from None
        except MCPError as exc:
            self._drop()
            raise _McpFailure("server_closed", "transient", exc.message) from None
        return None

    async def _call(self, client: Client, query: str) -> tuple[CallToolResult, str]:
        """One tool call for ``query``: the result and the digest of its JSON form."""
        from mcp.shared.exceptions import MCPError
        from pydantic import ValidationError

        arguments = fill_arguments(self.options.arguments, query)
        assert isinstance(arguments, dict)
        call = ToolCall(adapter_id=self.adapter_id, tool=self.options.tool, arguments=arguments)
        try:
            result = await client.call_tool(
                self.options.tool, arguments, read_timeout_seconds=self._timeout()
            )
        except MCPError as exc:
            failure = _call_failure(exc.code, exc.message)
            if failure.failure == "transient":
                self._drop()  # hung or gone: the next question starts it afresh
            self._observe(call, failure=failure.reason)
            raise failure from None
        except (ValidationError, RuntimeError) as exc:
            self._observe(call, failure="invalid_result")
            raise _McpFailure("invalid_result", "misconfigured", type(exc).__name__) from None
        data = result.model_dump_json(by_alias=True, exclude_none=True)
        if len(data.encode("utf-8")) > self.runtime.network.max_page_bytes:
            self._observe(call, failure="content_too_large")
            raise _McpFailure("content_too_large", "transient")
        payload: JsonValue = json.loads(data)
        self._observe(call, result=payload)
        if result.is_error:
            raise _McpFailure("tool_error", "transient", _text_of(result)[:200])
        return result, sha256_digest(data)

    def _observe(
        self, call: ToolCall, *, result: JsonValue = None, failure: str | None = None
    ) -> None:
        observer = self.runtime.tool_observer
        if observer is not None:
            observer(ToolCall(call.adapter_id, call.tool, call.arguments, result, failure))

    async def aclose(self) -> None:
        """Stop this loop's server (and any still being stopped) and wait for them to end."""
        loop = asyncio.get_running_loop()
        state = self._loops.pop(loop, None)
        if state is None:
            return
        if state.server is not None:
            await state.server.stop()
        if state.stopping:
            await asyncio.gather(*state.stopping, return_exceptions=True)


def _call_failure(code: int, message: str) -> _McpFailure:
    """The failure an MCP error code means for the attempt."""
    from mcp.types import CONNECTION_CLOSED, INVALID_PARAMS, METHOD_NOT_FOUND, REQUEST_TIMEOUT

    if code == REQUEST_TIMEOUT:
        return _McpFailure("deadline_exceeded", "transient")
    if code == CONNECTION_CLOSED:
        return _McpFailure("server_closed", "transient")
    if code in (INVALID_PARAMS, METHOD_NOT_FOUND):
        return _McpFailure("tool_refused", "misconfigured", message[:200])
    return _McpFailure("tool_failed", "transient", message[:200])


def _schema_problem(schema: Mapping[str, Any], arguments: JsonValue) -> str | None:
    """Why ``arguments`` do not fit ``schema`` (a JSON Schema), or None when they do."""
    import jsonschema

    try:
        validator = jsonschema.validators.validator_for(schema)
        validator.check_schema(schema)
        error = jsonschema.exceptions.best_match(validator(schema).iter_errors(arguments))
    except jsonschema.exceptions.SchemaError as exc:
        return f"the tool's input schema is invalid: {exc.message}"
    return None if error is None else error.message


def _text_of(result: CallToolResult) -> str:
    return "\n\n".join(
        text for block in result.content if isinstance(text := getattr(block, "text", None), str)
    )


def _items(result: CallToolResult) -> list[_Item]:
    """The result's items: structured ``results`` (or a bare list), a JSON text holding the
    same, or else the text content as one item."""
    listed = _listed(result.structured_content)
    text = _text_of(result)
    if listed is None and text.strip().startswith(("[", "{")):
        with contextlib.suppress(ValueError, RecursionError):
            listed = _listed(json.loads(text))
    if listed is None:
        return [_Item("", text, "")] if text.strip() else []
    items = []
    for entry in listed:
        if isinstance(entry, str):
            items.append(_Item("", entry, ""))
            continue
        if not isinstance(entry, dict):
            continue
        body = entry.get("text", entry.get("content"))
        title, url = entry.get("title"), entry.get("url")
        items.append(
            _Item(
                title if isinstance(title, str) else "",
                body if isinstance(body, str) else "",
                url if isinstance(url, str) else "",
            )
        )
    return items


def _listed(value: Any) -> list[Any] | None:
    """A list of items: the value itself, or under ``results`` (``result``: the SDK's
    wrapping of a tool that returned a bare list)."""
    if isinstance(value, list):
        return value
    if isinstance(value, dict):
        for key in ("results", "result"):
            if isinstance(value.get(key), list):
                return list(value[key])
    return None
