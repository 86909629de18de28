"""``ToolkitSession``: drive a task's tools one step at a time, by reference.

``observe()`` shows the state, the tool contracts, the artifact receipt and a
``state_ref`` fingerprint. ``arguments(tool, state_ref)`` offers candidate values for a
tool's parameters as ids (and, given a parent choice, the dependent candidates);
``operate(tool, ids, state_ref)`` runs one tool with offered ids only — a caller never
passes free text for a URL, a path or a passage. Each ``state_ref`` admits one operation:
an unknown, stale (the state moved on) or already used one is refused with ``StaleState``.
Operations run one at a time; a session is one caller's, in one process.

A session has one route, taken by its first operation: direct (``operate``) or delegated
(``delegate``, a model choosing the same steps within a budget; ``toolkit/delegate.py``).
Once taken, the other route is refused (``route_taken``), so two histories never merge.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, Literal

import rfc8785
from pydantic import BaseModel, ConfigDict, JsonValue

from ..store import MAX_READ_CHARS, EvidenceStore
from .confidence import Selection
from .errors import StaleState, ToolkitError
from .reports import ArtifactReceipt, CategoryCheck
from .tasks import EvidenceTask

if TYPE_CHECKING:
    from ..llm.client import ChatCompletionsClient
    from .delegate import DelegationResult

__all__ = [
    "MAX_OPTIONS",
    "OBSERVED_CAPTURES",
    "TOOL_NAMES",
    "ArgumentDomain",
    "ArgumentOption",
    "ArgumentsResult",
    "CaptureSummary",
    "DelegationView",
    "LastOperation",
    "Observation",
    "OperationResult",
    "ParameterContract",
    "TaskView",
    "ToolContract",
    "ToolFailure",
    "ToolkitSession",
]

#: Captures listed in an observation (older ones stay readable by reference).
OBSERVED_CAPTURES = 8
#: Candidates per ``arguments`` answer; ``start`` pages through the rest.
MAX_OPTIONS = 50


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ParameterContract(_Frozen):
    """A tool parameter; ``depends_on`` names the parameter whose choice lists its values."""

    name: str
    description: str
    depends_on: str | None = None
    #: How sure a delegated model must be of its option: ``match`` where one option is
    #: right (recording a quote), ``explore`` where several are reasonable (where to look).
    selection: Selection = "match"


class ToolContract(_Frozen):
    """A tool: its name, what it does, its effect and its parameters."""

    name: str
    description: str
    effect: Literal["observe", "capture", "record", "save"]
    parameters: tuple[ParameterContract, ...] = ()


class ArgumentOption(_Frozen):
    """One value a parameter may take: the id to pass, and a label for a reader."""

    id: str
    label: str


class ArgumentDomain(_Frozen):
    """Candidates for one parameter (under ``parent`` for a dependent one)."""

    parameter: str
    parent: dict[str, str]
    options: tuple[ArgumentOption, ...]
    start: int
    total: int


class ArgumentsResult(_Frozen):
    """The values each parameter of ``tool`` may take now, for ``state_ref``."""

    tool: str
    state_ref: str
    domains: tuple[ArgumentDomain, ...]
    #: Dependent parameters not listed because their parent was not chosen yet.
    waiting_for_parent: tuple[str, ...]


class ToolFailure(_Frozen):
    """Why an operation failed: a snake_case reason and one line of detail."""

    reason: str
    detail: str


class OperationResult(_Frozen):
    """``ok`` with ``result``, or not ok with ``error``; ``state_ref`` is the new state's."""

    tool: str
    ok: bool
    result: JsonValue = None
    error: ToolFailure | None = None
    state_ref: str


class CaptureSummary(_Frozen):
    """A capture as an observation lists it (no text)."""

    ref: str
    source: str
    length: int
    digest: str
    summary: str


class TaskView(_Frozen):
    """The task a session works on, as an observation shows it."""

    name: str
    description: str
    source: str
    categories: dict[str, str]
    required: tuple[str, ...]
    output: str
    entry_url: str | None
    allowed_origins: tuple[str, ...]
    queries: tuple[str, ...]


class LastOperation(_Frozen):
    """The previous operation's tool, whether it worked, and why not."""

    tool: str
    ok: bool
    reason: str | None = None


Route = Literal["direct", "delegated"]


class DelegationView(_Frozen):
    """Whether ``delegate`` can run now (``reason`` says why not), the route this session
    took, and the goal and status of its delegation once started."""

    ready: bool
    reason: str | None
    route: Route | None
    goal: str | None = None
    status: str | None = None


class Observation(_Frozen):
    """The session's state: its ``state_ref``, the task, the tools, captures, records,
    checks, budget usage, the last operation and read, and the artifact receipt once saved."""

    state_ref: str
    step: int
    task: TaskView | None
    tools: tuple[ToolContract, ...]
    captures: tuple[CaptureSummary, ...]
    capture_count: int
    records: dict[str, int]
    checks: tuple[CategoryCheck, ...]
    usage: dict[str, int]
    last_operation: LastOperation | None
    #: The text of the last read (evidence.read, web.read_section), at most 1,200 characters.
    last_read: str | None
    receipt: ArtifactReceipt | None
    delegation: DelegationView


def _p(
    name: str,
    description: str,
    depends_on: str | None = None,
    selection: Selection = "match",
) -> ParameterContract:
    return ParameterContract(
        name=name, description=description, depends_on=depends_on, selection=selection
    )


_WEB_TOOLS = (
    ToolContract(
        name="web.open",
        description="Capture the task's entry page (inside the allowed origins).",
        effect="capture",
        parameters=(_p("url", "the entry URL"),),
    ),
    ToolContract(
        name="web.links",
        description="List the links a captured page showed, inside the allowed origins.",
        effect="observe",
        parameters=(_p("page", "a captured page", selection="explore"),),
    ),
    ToolContract(
        name="web.follow",
        description="Capture the page an observed link points to.",
        effect="capture",
        parameters=(_p("link", "a link observed on a captured page", selection="explore"),),
    ),
    ToolContract(
        name="web.read_section",
        description="Read one passage of a captured page.",
        effect="observe",
        parameters=(
            _p("page", "a captured page", selection="explore"),
            _p("passage", "a passage", "page", "explore"),
        ),
    ),
)
_FILE_TOOLS = (
    ToolContract(
        name="files.list",
        description="List regular files below a folder of the root (links refused).",
        effect="observe",
        parameters=(_p("under", "a folder, relative to the root", selection="explore"),),
    ),
    ToolContract(
        name="files.search",
        description="Literal, case-sensitive search; matching files are captured.",
        effect="capture",
        parameters=(_p("query", "a task query or marker", selection="explore"),),
    ),
    ToolContract(
        name="files.read",
        description="Capture one plain file listed or matched before.",
        effect="capture",
        parameters=(_p("path", "a file path, relative to the root", selection="explore"),),
    ),
)
_EVIDENCE_READ = ToolContract(
    name="evidence.read",
    description="Read at most 1,200 characters of a stored capture.",
    effect="observe",
    parameters=(
        _p("ref", "a stored capture", selection="explore"),
        _p("offset", "where to start", "ref", "explore"),
    ),
)
_TASK_TOOLS = (
    ToolContract(
        name="evidence.record",
        description="Record a passage holding a category's marker as that category's quote.",
        effect="record",
        parameters=(_p("category", "a category label"), _p("passage", "a passage", "category")),
    ),
    ToolContract(
        name="report.save",
        description="Save the report to the task's new output file (never overwrites).",
        effect="save",
    ),
)

#: Every toolkit tool, in contract order; a session offers the ones its task enables.
TOOL_NAMES: tuple[str, ...] = tuple(
    tool.name for tool in (*_WEB_TOOLS, *_FILE_TOOLS, _EVIDENCE_READ, *_TASK_TOOLS)
)


_NOT_READY = {
    "direct_only": "this server offers direct operation only (--direct-only)",
    "no_task": "no task is registered for this session; start it with a task and inputs",
    "no_model": "no model is configured: add an [llm] section to the settings",
    "route_direct": "this session already operates directly",
    "delegation_done": "this session already delegated its task once; start a new session",
    "delegation_running": "this session's delegation is still running",
}


@dataclass(frozen=True)
class _Candidate:
    value: str
    label: str


def _option_id(tool: str, parameter: str, value: str) -> str:
    digest = hashlib.sha256(f"{tool}\x00{parameter}\x00{value}".encode()).hexdigest()
    return "o-" + digest[:12]


class ToolkitSession:
    """One caller's step-by-step use of a task's tools (see the module docstring).

    Without a task only ``evidence.read`` is offered (over ``store``). ``model`` is the
    endpoint ``delegate`` uses (None: no delegation); ``direct_only`` refuses delegation
    even with one.
    """

    def __init__(
        self,
        task: EvidenceTask | None = None,
        *,
        store: EvidenceStore | None = None,
        model: ChatCompletionsClient | None = None,
        direct_only: bool = False,
    ):
        self.task = task
        self.model = model
        self.direct_only = direct_only
        self._route: Route | None = None
        self._goal: str | None = None
        self._delegation_status: str | None = None
        self.store = task.store if task is not None else (store or EvidenceStore())
        self._step = 0
        self._issued: set[str] = set()
        self._consumed: set[str] = set()
        # (state_ref, tool, parameter, parent option id) → {option id: value}
        self._offered: dict[tuple[str, str, str, str], dict[str, str]] = {}
        self._known_files: dict[str, None] = {}
        self._last: LastOperation | None = None
        self._last_read: str | None = None
        self._tools = {tool.name: tool for tool in self._contracts()}

    def _contracts(self) -> tuple[ToolContract, ...]:
        tools: list[ToolContract] = []
        if self.task is not None and self.task.web is not None:
            tools += _WEB_TOOLS
        if self.task is not None and self.task.files is not None:
            tools += _FILE_TOOLS
        tools.append(_EVIDENCE_READ)
        if self.task is not None:
            tools += _TASK_TOOLS
        return tuple(tools)

    # -- state references -------------------------------------------------------------------
    def _fingerprint(self) -> str:
        task = self.task
        state: dict[str, Any] = {
            "step": self._step,
            "captures": sorted(capture.ref for capture in self.store.references()),
            "known_files": list(self._known_files),
        }
        if task is not None:
            state["records"] = [[item.category, item.ref, item.offset] for item in task.records()]
            state["saved"] = task.saved_digest
            if task.web is not None:
                state["web"] = [task.web.usage.pages, task.web.usage.bytes]
                state["links"] = len(task.web.observed_links())
        digest = hashlib.sha256(rfc8785.dumps(state)).hexdigest()
        return f"state:{self._step}:{digest[:24]}"

    def _issue(self) -> str:
        ref = self._fingerprint()
        self._issued.add(ref)
        return ref

    def _check_state(self, state_ref: str) -> None:
        if state_ref in self._consumed:
            raise StaleState(
                f"{state_ref} was already used by an operation; call observe for the current one",
                reason="repeated_state_ref",
            )
        if state_ref not in self._issued:
            raise StaleState(
                f"{state_ref} was never issued by this session; call observe",
                reason="unknown_state_ref",
            )
        if state_ref != self._fingerprint():
            raise StaleState(
                f"{state_ref} is stale: the state has changed since; call observe",
                reason="stale_state_ref",
            )

    # -- observe ---------------------------------------------------------------------------
    def observe(self) -> Observation:
        """The session's state now, with a fresh ``state_ref`` for the next operation."""
        task = self.task
        captures = self.store.references()
        usage: dict[str, int] = {"captures": len(captures)}
        records: dict[str, int] = {}
        view = None
        if task is not None:
            inputs = task.inputs
            view = TaskView(
                name=task.spec.name,
                description=task.spec.description,
                source=task.spec.source,
                categories=dict(inputs.markers),
                required=task.required,
                output=inputs.output,
                entry_url=inputs.url,
                allowed_origins=inputs.allowed_origins,
                queries=inputs.queries,
            )
            records = dict.fromkeys(inputs.markers, 0)
            for item in task.records():
                records[item.category] += 1
            if task.web is not None:
                usage.update(
                    pages=task.web.usage.pages,
                    bytes=task.web.usage.bytes,
                    max_pages=task.web.usage.max_pages,
                    max_bytes=task.web.usage.max_bytes,
                )
            if task.files is not None:
                usage["files_read"] = len(task.files.captures())
        return Observation(
            state_ref=self._issue(),
            step=self._step,
            task=view,
            tools=tuple(self._tools.values()),
            captures=tuple(
                CaptureSummary(
                    ref=item.ref,
                    source=item.source,
                    length=item.length,
                    digest=item.digest,
                    summary=item.summary,
                )
                for item in captures[-OBSERVED_CAPTURES:]
            ),
            capture_count=len(captures),
            records=records,
            checks=task.checks() if task is not None else (),
            usage=usage,
            last_operation=self._last,
            last_read=self._last_read,
            receipt=task.artifact_receipt() if task is not None else None,
            delegation=self.delegation_status(),
        )

    # -- routes ------------------------------------------------------------------------------
    def delegation_status(self) -> DelegationView:
        """Whether ``delegate`` can run now, and the route, goal and status so far."""
        return DelegationView(
            ready=self._not_ready() is None,
            reason=self._not_ready(),
            route=self._route,
            goal=self._goal,
            status=self._delegation_status,
        )

    def _not_ready(self) -> str | None:
        """Why ``delegate`` cannot run now, as a reason code (None: it can)."""
        if self.direct_only:
            return "direct_only"
        if self.task is None:
            return "no_task"
        if self.model is None:
            return "no_model"
        if self._route == "direct":
            return "route_direct"
        if self._route == "delegated":
            return "delegation_done" if self._delegation_status else "delegation_running"
        return None

    def _refuse_route(self, wanted: Route) -> None:
        if self._route is None or self._route == wanted:
            return  # a second delegation is refused by _not_ready
        if self._route == "delegated":
            raise ToolkitError(
                "this session delegated its task to a model; direct operations are refused so "
                "the two histories never merge; start a new session to operate step by step",
                reason="route_taken",
            )
        raise ToolkitError(
            f"this session already operates directly ({self._step} operation"
            f"{'' if self._step == 1 else 's'}); delegation is "
            "refused so the two histories never merge; start a new session to delegate",
            reason="route_taken",
        )

    async def delegate(
        self,
        goal: str,
        *,
        max_steps: int | None = None,
        timeout_s: float | None = None,
        max_tokens: int | None = None,
        archive: Path | None = None,
    ) -> DelegationResult:
        """Hand the task to the model: it chooses each step from what is on offer until the
        checks pass and the report is saved, it says it is done, or the budget runs out.

        Budgets left out come from the task's ``[delegation]`` rules; ``archive`` appends one
        JSON line per step. A session delegates once, and only before any direct
        operation; otherwise (or without a task or model) ``ToolkitError``.
        """
        from .delegate import Delegation  # the loop needs this class; imported on use

        self._refuse_route("delegated")
        reason = self._not_ready()
        if reason is not None:
            raise ToolkitError(_NOT_READY[reason], reason=reason)
        assert self.model is not None  # _not_ready checked it (and the task)
        delegation = Delegation(
            self,
            self.model,
            goal,
            max_steps=max_steps,
            timeout_s=timeout_s,
            max_tokens=max_tokens,
            archive=archive,
        )
        self._route, self._goal = "delegated", delegation.goal
        try:
            result = await delegation.run()
        except BaseException:
            self._delegation_status = "failed"
            raise
        self._delegation_status = result.status
        return result

    # -- arguments ---------------------------------------------------------------------------
    def _contract(self, tool: str) -> ToolContract:
        try:
            return self._tools[tool]
        except KeyError:
            raise ToolkitError(
                f"no tool {tool!r} here; tools: {', '.join(self._tools)}", reason="unknown_tool"
            ) from None

    def arguments(
        self,
        tool: str,
        state_ref: str,
        parent: Mapping[str, str] | None = None,
        start: int = 0,
    ) -> ArgumentsResult:
        """Candidates for ``tool``'s parameters under ``state_ref``. ``parent`` maps a parent
        parameter to a chosen option id; its dependent parameter's candidates are listed."""
        self._check_state(state_ref)
        contract = self._contract(tool)
        parent = dict(parent or {})
        names = {item.name for item in contract.parameters}
        if set(parent) - names:
            raise ToolkitError(
                f"{tool} has no parameter {sorted(set(parent) - names)[0]!r}",
                reason="unknown_argument",
            )
        domains: list[ArgumentDomain] = []
        waiting: list[str] = []
        for parameter in contract.parameters:
            parent_id = ""
            parent_value: str | None = None
            if parameter.depends_on is not None:
                if parameter.depends_on not in parent:
                    waiting.append(parameter.name)
                    continue
                parent_id = parent[parameter.depends_on]
                parent_value = self._offered_value(
                    state_ref, tool, parameter.depends_on, "", parent_id
                )
            elif parameter.name in parent:
                continue  # the caller already chose it
            candidates = self._candidates(tool, parameter.name, parent_value)
            window = candidates[max(0, start) : max(0, start) + MAX_OPTIONS]
            offered = self._offered.setdefault((state_ref, tool, parameter.name, parent_id), {})
            options = []
            for candidate in window:
                option_id = _option_id(tool, parameter.name, candidate.value)
                offered[option_id] = candidate.value
                options.append(ArgumentOption(id=option_id, label=candidate.label))
            domains.append(
                ArgumentDomain(
                    parameter=parameter.name,
                    parent={parameter.depends_on: parent_id} if parameter.depends_on else {},
                    options=tuple(options),
                    start=max(0, start),
                    total=len(candidates),
                )
            )
        return ArgumentsResult(
            tool=tool,
            state_ref=state_ref,
            domains=tuple(domains),
            waiting_for_parent=tuple(waiting),
        )

    def _offered_value(
        self, state_ref: str, tool: str, parameter: str, parent_id: str, option_id: str
    ) -> str:
        try:
            return self._offered[(state_ref, tool, parameter, parent_id)][option_id]
        except KeyError:
            raise ToolkitError(
                f"{option_id!r} was not offered for {tool} {parameter} under {state_ref}; "
                "call arguments first",
                reason="argument_not_offered",
            ) from None

    def _candidates(self, tool: str, parameter: str, parent: str | None) -> list[_Candidate]:
        task = self.task
        web = task.web if task is not None else None
        files = task.files if task is not None else None
        if (tool, parameter) == ("evidence.read", "ref"):
            return [
                _Candidate(c.ref, f"{c.source} ({c.length} chars)") for c in self.store.references()
            ]
        if (tool, parameter) == ("evidence.read", "offset") and parent is not None:
            length = self.store.describe(parent).length
            return [
                _Candidate(
                    str(offset), f"characters {offset}–{min(length, offset + MAX_READ_CHARS)}"
                )
                for offset in range(0, max(length, 1), MAX_READ_CHARS)
            ]
        if task is not None and (tool, parameter) == ("evidence.record", "category"):
            return [
                _Candidate(label, f"{label}: {marker}") for label, marker in task.markers.items()
            ]
        if task is not None and (tool, parameter) == ("evidence.record", "passage") and parent:
            return [
                _Candidate(p.passage_id, f"{self.store.describe(p.ref).source} · {p.preview}")
                for p in task.record_options(parent)
            ]
        if web is not None and task is not None:
            if (tool, parameter) == ("web.open", "url") and task.inputs.url:
                return [_Candidate(task.inputs.url, task.inputs.url)]
            if parameter == "page" and tool in ("web.links", "web.read_section"):
                return [_Candidate(p.ref, f"{p.final_url} {p.title}".strip()) for p in web.pages()]
            if (tool, parameter) == ("web.read_section", "passage") and parent is not None:
                return [
                    _Candidate(p.passage_id, p.preview) for p in self.store.passage_options(parent)
                ]
            if (tool, parameter) == ("web.follow", "link"):
                return [
                    _Candidate(link.link_id, f"{link.url} {link.text}".strip())
                    for link in web.observed_links()
                    if link.captured_ref is None
                ]
        if files is not None and task is not None:
            if (tool, parameter) == ("files.list", "under"):
                folders = {""} | {
                    str(PurePosixPath(path).parent).removeprefix(".") for path in self._known_files
                }
                return [_Candidate(f, f or "(root)") for f in sorted(folders)]
            if (tool, parameter) == ("files.search", "query"):
                queries = task.inputs.queries + tuple(task.markers.values())
                return [_Candidate(q, q) for q in dict.fromkeys(queries)]
            if (tool, parameter) == ("files.read", "path"):
                return [_Candidate(path, path) for path in self._known_files]
        return []

    # -- operate -----------------------------------------------------------------------------
    async def operate(
        self, tool: str, arguments: Mapping[str, str], state_ref: str
    ) -> OperationResult:
        """Run ``tool`` with offered option ids under the current ``state_ref``.

        Protocol errors (state, tool name, ids, a delegated session) raise; a tool that runs
        and fails returns ``ok=False`` with its reason. Either way a run consumes
        ``state_ref``, and the first one takes the direct route.
        """
        self._refuse_route("direct")
        return await self._operate(tool, arguments, state_ref, route="direct")

    async def _operate(
        self, tool: str, arguments: Mapping[str, str], state_ref: str, *, route: Route
    ) -> OperationResult:
        self._check_state(state_ref)
        contract = self._contract(tool)
        names = [item.name for item in contract.parameters]
        extra = sorted(set(arguments) - set(names))
        if extra:
            raise ToolkitError(f"{tool} has no parameter {extra[0]!r}", reason="unknown_argument")
        missing = [name for name in names if name not in arguments]
        if missing:
            raise ToolkitError(f"{tool} needs {missing[0]!r}", reason="missing_argument")
        values: dict[str, str] = {}
        for parameter in contract.parameters:
            parent_id = arguments[parameter.depends_on] if parameter.depends_on else ""
            values[parameter.name] = self._offered_value(
                state_ref, tool, parameter.name, parent_id, arguments[parameter.name]
            )
        self._consumed.add(state_ref)
        self._route = route
        self._step += 1
        # The step counter is in every state_ref, so every ref issued so far is stale now.
        self._offered.clear()
        try:
            result = await self._run(tool, values)
        except ToolkitError as exc:
            self._last = LastOperation(tool=tool, ok=False, reason=exc.reason)
            return OperationResult(
                tool=tool,
                ok=False,
                error=ToolFailure(reason=exc.reason, detail=exc.detail),
                state_ref=self._issue(),
            )
        self._last = LastOperation(tool=tool, ok=True)
        return OperationResult(tool=tool, ok=True, result=result, state_ref=self._issue())

    async def _run(self, tool: str, values: dict[str, str]) -> JsonValue:
        runner = self._runners().get(tool)
        if runner is None:  # pragma: no cover - contracts and runners are listed together
            raise ToolkitError(f"no runner for {tool}", reason="unknown_tool")
        return await runner(values)

    def _runners(self) -> dict[str, Callable[[dict[str, str]], Awaitable[JsonValue]]]:
        task = self.task
        runners: dict[str, Callable[[dict[str, str]], Awaitable[JsonValue]]] = {
            "evidence.read": self._evidence_read
        }
        if task is None:
            return runners
        web, files = task.web, task.files
        if web is not None:

            async def web_open(values: dict[str, str]) -> JsonValue:
                return (await web.open(values["url"])).model_dump(mode="json")

            async def web_links(values: dict[str, str]) -> JsonValue:
                links = web.links(values["page"])
                return {"page": values["page"], "links": [x.model_dump(mode="json") for x in links]}

            async def web_follow(values: dict[str, str]) -> JsonValue:
                return (await web.follow(values["link"])).model_dump(mode="json")

            async def web_section(values: dict[str, str]) -> JsonValue:
                section = web.read_section(values["passage"])
                self._last_read = section.text[:MAX_READ_CHARS]
                return section.model_dump(mode="json")

            runners.update(
                {
                    "web.open": web_open,
                    "web.links": web_links,
                    "web.follow": web_follow,
                    "web.read_section": web_section,
                }
            )
        if files is not None:

            async def files_list(values: dict[str, str]) -> JsonValue:
                listing = await asyncio.to_thread(files.list, values["under"])
                self._known_files.update(dict.fromkeys(item.path for item in listing.files))
                return listing.model_dump(mode="json")

            async def files_search(values: dict[str, str]) -> JsonValue:
                found = await asyncio.to_thread(files.search, values["query"])
                self._known_files.update(dict.fromkeys(item.path for item in found.matches))
                return found.model_dump(mode="json")

            async def files_read(values: dict[str, str]) -> JsonValue:
                return (await asyncio.to_thread(files.read, values["path"])).model_dump(mode="json")

            runners.update(
                {"files.list": files_list, "files.search": files_search, "files.read": files_read}
            )

        async def record(values: dict[str, str]) -> JsonValue:
            return task.record(values["category"], values["passage"]).model_dump(mode="json")

        async def save(_values: dict[str, str]) -> JsonValue:
            return (await asyncio.to_thread(task.save)).model_dump(mode="json")

        runners.update({"evidence.record": record, "report.save": save})
        return runners

    async def _evidence_read(self, values: dict[str, str]) -> JsonValue:
        window = self.store.window(values["ref"], int(values["offset"]))
        self._last_read = window.text
        return window.model_dump(mode="json")

    async def aclose(self) -> None:
        """Close the task's web tools, when there is a task."""
        if self.task is not None:
            await self.task.aclose()
