"""``ToolkitSession``: drive a task's tools one step at a time, by reference.

``observe()`` shows the state, the tool contracts, the artifact receipt and a
``state_ref`` fingerprint. ``arguments(tool, state_ref)`` offers candidate values for a
tool's parameters as ids (and, given a parent choice, the dependent candidates);
``operate(tool, ids, state_ref)`` runs one tool with offered ids only — a caller never
passes free text for a URL, a path or a passage. Each ``state_ref`` admits one operation:
an unknown, stale (the state moved on) or already used one is refused with ``StaleState``.
Operations run one at a time; a session is one caller's, in one process.

The tools are the task's ``Tool`` objects (``tools.py``), installed by its toolkits; the
session lists the advertised ones (older names stay callable). A session made with
``build`` (a task script's) builds its task on its first need of it, once. The state
digest covers the step, the captures, the records, the saved report and each toolkit's
``observe()`` projection.

A session has one route, taken by its first operation: direct (``operate``) or delegated
(``delegate``, a model choosing the same steps within a budget; ``toolkit/_delegate.py``).
Once taken, the other route is refused (``route_taken``), so two histories never merge.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import rfc8785
from pydantic import JsonValue

from .._evidence_store import MAX_READ_CHARS, EvidenceStore
from ..errors import StaleState, TaskDefinitionError, ToolkitError
from ._contracts import (
    MAX_OPTIONS,
    OBSERVED_CAPTURES,
    ArgumentDomain,
    ArgumentOption,
    ArgumentsResult,
    CaptureSummary,
    DelegationView,
    LastOperation,
    Observation,
    OperationResult,
    ParameterContract,
    Route,
    TaskView,
    ToolContract,
    ToolFailure,
)
from ._delegate import Delegation, DelegationResult
from ._kits import ALIASES, TOOL_NAMES, evidence_tools
from ._tasks import EvidenceTask
from ._tools import Tool

if TYPE_CHECKING:
    from ..llm._client import ChatCompletionsClient

__all__ = [
    "ALIASES",
    "MAX_OPTIONS",
    "MAX_PROJECTION_CHARS",
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

#: The longest a toolkit's ``observe()`` projection may be, as compact JSON.
MAX_PROJECTION_CHARS = 4_000


_NOT_READY = {
    "direct_only": "this server offers direct operation only (--direct-only)",
    "no_task": "no task is registered for this session; start it with a task and inputs",
    "no_model": "no model is configured: add an [llm] section to the settings",
    "route_direct": "this session already operates directly",
    "delegation_done": "this session already delegated its task once; start a new session",
    "delegation_running": "this session's delegation is still running",
}


def _option_id(tool: str, parameter: str, value: str) -> str:
    digest = hashlib.sha256(f"{tool}\x00{parameter}\x00{value}".encode()).hexdigest()
    return "o-" + digest[:12]


class ToolkitSession:
    """One caller's step-by-step use of a task's tools (see the module docstring).

    Without a task only the evidence reading tools are offered (over ``store``). ``build``
    (instead of ``task``) makes the task on the session's first need of it, once: a task
    script's ``build(inputs)``. ``model`` is the endpoint ``delegate`` uses (None: no
    delegation); ``direct_only`` refuses delegation even with one.
    """

    def __init__(
        self,
        task: EvidenceTask | None = None,
        *,
        store: EvidenceStore | None = None,
        model: ChatCompletionsClient | None = None,
        direct_only: bool = False,
        build: Callable[[], EvidenceTask] | None = None,
    ):
        if task is not None and build is not None:
            raise TaskDefinitionError("a session takes a task or a build, not both")
        self._task = task
        self._build = build
        self.model = model
        self.direct_only = direct_only
        self._route: Route | None = None
        self._goal: str | None = None
        self._delegation_status: str | None = None
        self._store = store if store is not None else EvidenceStore()
        self._step = 0
        self._issued: set[str] = set()
        self._consumed: set[str] = set()
        # (state_ref, tool, parameter, parent option id) → {option id: value}
        self._offered: dict[tuple[str, str, str, str], dict[str, str]] = {}
        self._last: LastOperation | None = None
        self._last_read: str | None = None
        self._registry: dict[str, Tool] | None = None

    # -- the task, built once on first need --------------------------------------------------
    @property
    def task(self) -> EvidenceTask | None:
        """The session's task (a script's ``build`` runs here, the first time only)."""
        if self._task is None and self._build is not None:
            build, self._build = self._build, None
            self._task = build()
        return self._task

    @property
    def has_task(self) -> bool:
        """A task is registered (built or still to build)."""
        return self._task is not None or self._build is not None

    @property
    def task_built(self) -> bool:
        """The task exists now (given, or built by a first need of it)."""
        return self._task is not None

    @property
    def store(self) -> EvidenceStore:
        """The task's store, or the session's own without a task (or before the build)."""
        return self._task.store if self._task is not None else self._store

    @property
    def step(self) -> int:
        """Operations run so far."""
        return self._step

    def issued(self, state_ref: str) -> bool:
        """This session issued ``state_ref`` (now or earlier)."""
        return state_ref in self._issued

    def _tools(self) -> dict[str, Tool]:
        if self._registry is None:
            task = self.task
            tools = task.tools() if task is not None else tuple(evidence_tools(self.store))
            self._registry = {tool.name: tool for tool in tools}
        return self._registry

    def contract(self, tool: str) -> ToolContract:
        """The contract of ``tool``, advertised or an older name (``unknown_tool`` else)."""
        return self._tool(tool).contract

    def tool_names(self) -> tuple[str, ...]:
        """The advertised tools of this session, in contract order."""
        return tuple(name for name, tool in self._tools().items() if tool.advertised)

    def _projections(self) -> dict[str, JsonValue]:
        """Each toolkit's ``observe()``; one that captures or is not compact JSON is refused."""
        task = self.task
        if task is None:
            return {}
        views: dict[str, JsonValue] = {}
        for toolkit in task.toolkits:
            before = len(self.store)
            view = dict(toolkit.observe())
            try:
                text = json.dumps(view, sort_keys=True, allow_nan=False)
            except (TypeError, ValueError):
                raise TaskDefinitionError(
                    f"toolkit {toolkit.name!r}: observe() must return JSON values"
                ) from None
            if len(self.store) != before:
                raise TaskDefinitionError(f"toolkit {toolkit.name!r}: observe() captured text")
            if len(text) > MAX_PROJECTION_CHARS:
                raise TaskDefinitionError(
                    f"toolkit {toolkit.name!r}: observe() is {len(text)} characters of JSON, "
                    f"more than {MAX_PROJECTION_CHARS}"
                )
            views[toolkit.name] = view
        return views

    # -- state references -------------------------------------------------------------------
    def _fingerprint(self) -> str:
        task = self.task
        state: dict[str, Any] = {
            "step": self._step,
            "captures": sorted(capture.ref for capture in self.store.references()),
        }
        if task is not None:
            state["records"] = [[item.category, item.ref, item.offset] for item in task.records()]
            state["saved"] = task.saved_digest
            state["toolkits"] = self._projections()
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
            tools=tuple(tool.contract for tool in self._tools().values() if tool.advertised),
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
            toolkits=self._projections(),
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
        if not self.has_task:
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
        self._refuse_route("delegated")
        reason = self._not_ready()
        if reason is not None:
            raise ToolkitError(_NOT_READY[reason], reason=reason)
        assert self.model is not None  # _not_ready checked it (and the task)
        task = self.task
        assert task is not None
        delegation = Delegation(
            self,
            task,
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
    def _tool(self, tool: str) -> Tool:
        try:
            return self._tools()[tool]
        except KeyError:
            raise ToolkitError(
                f"no tool {tool!r} here; tools: {', '.join(self.tool_names())}",
                reason="unknown_tool",
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
        contract = self._tool(tool).contract
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
            candidates = self._tool(tool).offer(parameter.name, parent_value)
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
        chosen = self._tool(tool)
        contract = chosen.contract
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
        before = {capture.ref for capture in self.store.references()}
        try:
            result = await chosen.execute(values)
        except ToolkitError as exc:
            self._last = LastOperation(tool=tool, ok=False, reason=exc.reason)
            return OperationResult(
                tool=tool,
                ok=False,
                error=ToolFailure(reason=exc.reason, detail=exc.detail),
                state_ref=self._issue(),
            )
        task = self.task
        if task is not None and chosen.effect == "capture":
            task.adopt([c.ref for c in self.store.references() if c.ref not in before])
        if chosen.effect == "observe" and isinstance(result, dict):
            text = result.get("text")
            if isinstance(text, str):
                self._last_read = text[:MAX_READ_CHARS]
        self._last = LastOperation(tool=tool, ok=True)
        return OperationResult(tool=tool, ok=True, result=result, state_ref=self._issue())

    async def run_step(
        self, tool: str, arguments: Mapping[str, str], state_ref: str
    ) -> OperationResult:
        """``operate`` on the delegated route (the delegation loop's way to run a step)."""
        return await self._operate(tool, arguments, state_ref, route="delegated")

    async def aclose(self) -> None:
        """Close the task's toolkits, when a task was built."""
        if self._task is not None:
            await self._task.aclose()
