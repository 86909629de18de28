"""The built-in toolkits and the shared evidence tools, each tool one ``ToolDefinition``.

- ``WebToolkit`` (``web``): ``web.open_link`` (the task's entry, then links a captured page
  showed) and ``web.read_section``; ``WebTools`` does the bounded fetching.
- ``WorkspaceToolkit`` (``files``): ``files.list``, ``files.search``, ``files.read`` over
  ``WorkspaceTools``.
- ``evidence_tools(store)``: ``read_evidence`` (a window of a capture) and ``evidence_page``
  (a page of a capture's passages); a session without a task offers only these.
- ``task_tools(task)``: ``record_evidence`` and ``save_report``.

Each tool is declared once below, over the object it reads (the toolkit, the store or the
task), and bound to it on install. ``TOOL_NAMES`` and ``ALIASES`` are read off those
declarations. The older names (``web.open``, ``web.links``, ``web.follow``,
``evidence.read``, ``evidence.record``, ``report.save``) stay callable for one release, as
unadvertised tools: an observation, the MCP ``tool`` enum and a delegated model never see
them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

from pydantic import BaseModel, JsonValue

from .._evidence_store import MAX_READ_CHARS, EvidenceStore, Passage
from ..settings import NetworkSettings
from ._reports import ArtifactReceipt, EvidenceRecord
from ._tools import CandidateValue, Parameter, Tool, ToolDefinition, ToolRegistry
from ._web import WebBudget, WebTools
from ._workspace import WorkspaceLimits, WorkspaceTools

__all__ = [
    "ALIASES",
    "BUILTIN_TOOLS",
    "PASSAGES_PER_PAGE",
    "TOOL_NAMES",
    "RecordingTask",
    "WebToolkit",
    "WorkspaceToolkit",
    "evidence_tools",
    "task_tools",
]

#: Passages per ``evidence_page`` page.
PASSAGES_PER_PAGE = 10


def _dump(value: BaseModel) -> JsonValue:
    result: JsonValue = value.model_dump(mode="json")
    return result


class WebToolkit:
    """Origin-bounded web tools for one entry URL (``name`` ``web``).

    ``tools`` is the fetching seam: by default ``install`` builds ``WebTools`` over the
    task's network policy and store; a caller may pass tools over another provider.
    Nothing is fetched before a tool runs.
    """

    name = "web"

    def __init__(
        self,
        url: str,
        allowed_origins: Iterable[str],
        *,
        budget: WebBudget | None = None,
        network: NetworkSettings | None = None,
        tools: WebTools | None = None,
    ) -> None:
        self.url = url
        self.allowed_origins = tuple(allowed_origins)
        self.budget = budget
        self.network = network
        self._tools = tools
        self._store: EvidenceStore | None = None

    @property
    def tools(self) -> WebTools:
        """The web tools (after ``install``)."""
        if self._tools is None:
            raise RuntimeError("WebToolkit.tools before install")
        return self._tools

    @property
    def store(self) -> EvidenceStore:
        """The task's store, whose passages ``web.read_section`` offers (after ``install``)."""
        if self._store is None:
            raise RuntimeError("WebToolkit.store before install")
        return self._store

    def observe(self) -> Mapping[str, JsonValue]:
        """The entry, the page and link counts and the fetch usage (no text, no fetch)."""
        view: dict[str, JsonValue] = {"entry": self.url, "origins": list(self.allowed_origins)}
        if self._tools is not None:
            links = self._tools.observed_links()
            usage = self._tools.usage
            view |= {
                "pages": len(self._tools.pages()),
                "links_seen": len(links),
                "links_open": sum(1 for link in links if link.captured_ref is None),
                "fetches": usage.pages,
                "max_pages": usage.max_pages,
            }
        return view

    def install(self, task: ToolRegistry) -> None:
        """Make the web tools (unless given) over the task's store and network policy, and
        register ``web.open_link``, ``web.read_section`` and the older web names."""
        if self._tools is None:
            self._tools = WebTools.from_network(
                self.network or task.network,
                task.store,
                self.allowed_origins,
                budget=self.budget,
            )
        self._store = task.store
        for definition in _WEB_TOOLS:
            task.add_tool(definition.bind(self))

    async def aclose(self) -> None:
        """Close the web tools' fetcher (when they made it)."""
        if self._tools is not None:
            await self._tools.aclose()

    def entry_open(self) -> bool:
        """The entry page is not captured yet."""
        return not any(self.url in (page.url, page.final_url) for page in self.tools.pages())


# --- the web tools --------------------------------------------------------------------------


def _open_links(kit: WebToolkit, _parent: str | None) -> list[CandidateValue]:
    entry = [CandidateValue(kit.url, f"{kit.url} (entry)")] if kit.entry_open() else []
    return entry + [
        CandidateValue(link.link_id, f"{link.url} {link.text}".strip())
        for link in kit.tools.observed_links()
        if link.captured_ref is None
    ]


async def _open_link(kit: WebToolkit, values: Mapping[str, str]) -> JsonValue:
    """Follow an observed link by its id; the only other value offered is the entry URL."""
    web, chosen = kit.tools, values["link"]
    known = {link.link_id for link in web.observed_links()}
    page = await (web.follow(chosen) if chosen in known else web.open(chosen))
    return _dump(page)


def _pages(kit: WebToolkit, _parent: str | None) -> list[CandidateValue]:
    return [CandidateValue(p.ref, f"{p.final_url} {p.title}".strip()) for p in kit.tools.pages()]


def _passages(kit: WebToolkit, page: str | None) -> list[CandidateValue]:
    if page is None:
        return []
    return [CandidateValue(p.passage_id, p.preview) for p in kit.store.chunk_options(page)]


def _read_section(kit: WebToolkit, values: Mapping[str, str]) -> JsonValue:
    return _dump(kit.tools.read_section(values["passage"]))


def _entry(kit: WebToolkit, _parent: str | None) -> list[CandidateValue]:
    return [CandidateValue(kit.url, kit.url)]


async def _open_entry(kit: WebToolkit, values: Mapping[str, str]) -> JsonValue:
    return _dump(await kit.tools.open(values["url"]))


def _links(kit: WebToolkit, values: Mapping[str, str]) -> JsonValue:
    found = kit.tools.links(values["page"])
    return {"page": values["page"], "links": [_dump(link) for link in found]}


def _followable(kit: WebToolkit, _parent: str | None) -> list[CandidateValue]:
    return [c for c in _open_links(kit, None) if c.value != kit.url]


async def _follow(kit: WebToolkit, values: Mapping[str, str]) -> JsonValue:
    return _dump(await kit.tools.follow(values["link"]))


_PAGE = Parameter("page", "a captured page", "explore")
#: ``web.open_link``, ``web.read_section``, then the older web names.
_WEB_TOOLS: tuple[ToolDefinition[WebToolkit], ...] = (
    ToolDefinition(
        "web.open_link",
        "Capture a page: the task's entry, or a link a captured page showed "
        "(inside the allowed origins).",
        _open_link,
        (Parameter("link", "the entry or an observed link not yet opened", "explore"),),
        {"link": _open_links},
        effect="capture",
    ),
    ToolDefinition(
        "web.read_section",
        "Read one passage of a captured page.",
        _read_section,
        (_PAGE, Parameter("passage", "a passage", "explore", depends_on="page")),
        {"page": _pages, "passage": _passages},
    ),
    ToolDefinition(
        "web.open",
        "Capture the task's entry page (older name of web.open_link).",
        _open_entry,
        (Parameter("url", "the entry URL"),),
        {"url": _entry},
        effect="capture",
        older_name_of="web.open_link",
    ),
    ToolDefinition(
        "web.links",
        "List the links a captured page showed (web.open_link offers them).",
        _links,
        (_PAGE,),
        {"page": _pages},
        older_name_of="web.open_link",
    ),
    ToolDefinition(
        "web.follow",
        "Capture the page an observed link points to (older name of web.open_link).",
        _follow,
        (Parameter("link", "a link observed on a captured page", "explore"),),
        {"link": _followable},
        effect="capture",
        older_name_of="web.open_link",
    ),
)


class WorkspaceToolkit:
    """Root-bounded workspace tools (``name`` ``files``). ``files.search`` offers the task's
    ``queries``, its markers and the ``queries`` candidate pool (trusted generators)."""

    name = "files"

    def __init__(
        self,
        root: str | Path,
        queries: Iterable[str] = (),
        *,
        limits: WorkspaceLimits | None = None,
        tools: WorkspaceTools | None = None,
    ) -> None:
        self.root = Path(root)
        self.queries = tuple(queries)
        self.limits = limits
        self._tools = tools
        self._task: ToolRegistry | None = None
        self._known: dict[str, None] = {}

    @property
    def tools(self) -> WorkspaceTools:
        """The workspace tools (after ``install``)."""
        if self._tools is None:
            raise RuntimeError("WorkspaceToolkit.tools before install")
        return self._tools

    @property
    def task(self) -> ToolRegistry:
        """The task the tools were installed in: its markers and pools feed the queries."""
        if self._task is None:
            raise RuntimeError("WorkspaceToolkit.task before install")
        return self._task

    def known_files(self) -> tuple[str, ...]:
        """Paths listed or matched so far (what ``files.read`` offers)."""
        return tuple(self._known)

    def learn(self, paths: Iterable[str]) -> None:
        """Remember ``paths`` (listed or matched) for ``files.list`` and ``files.read``."""
        self._known.update(dict.fromkeys(paths))

    def observe(self) -> Mapping[str, JsonValue]:
        """The queries and how many files are known and read (no file is opened)."""
        view: dict[str, JsonValue] = {
            "queries": list(self.queries),
            "known_files": len(self._known),
        }
        if self._tools is not None:
            view["files_read"] = len(self._tools.captures())
        return view

    def install(self, task: ToolRegistry) -> None:
        """Make the workspace tools (unless given) over the task's store, and register
        ``files.list``, ``files.search`` and ``files.read``."""
        if self._tools is None:
            self._tools = WorkspaceTools(self.root, task.store, limits=self.limits)
        self._task = task
        for definition in _WORKSPACE_TOOLS:
            task.add_tool(definition.bind(self))


# --- the workspace tools --------------------------------------------------------------------


def _folders(kit: WorkspaceToolkit, _parent: str | None) -> list[CandidateValue]:
    known = kit.known_files()
    found = {""} | {str(PurePosixPath(p).parent).removeprefix(".") for p in known}
    return [CandidateValue(f, f or "(root)") for f in sorted(found)]


async def _listing(kit: WorkspaceToolkit, values: Mapping[str, str]) -> JsonValue:
    found = await asyncio.to_thread(kit.tools.list, values["under"])
    kit.learn(item.path for item in found.files)
    return _dump(found)


def _queries(kit: WorkspaceToolkit, _parent: str | None) -> list[CandidateValue]:
    task = kit.task
    given = (*kit.queries, *task.markers.values(), *task.pool("queries"))
    return [CandidateValue(q, q) for q in given]


async def _search(kit: WorkspaceToolkit, values: Mapping[str, str]) -> JsonValue:
    found = await asyncio.to_thread(kit.tools.search, values["query"])
    kit.learn(item.path for item in found.matches)
    return _dump(found)


def _known_files(kit: WorkspaceToolkit, _parent: str | None) -> list[CandidateValue]:
    return [CandidateValue(p, p) for p in kit.known_files()]


async def _read_file(kit: WorkspaceToolkit, values: Mapping[str, str]) -> JsonValue:
    return _dump(await asyncio.to_thread(kit.tools.read, values["path"]))


_WORKSPACE_TOOLS: tuple[ToolDefinition[WorkspaceToolkit], ...] = (
    ToolDefinition(
        "files.list",
        "List regular files below a folder of the root (links refused).",
        _listing,
        (Parameter("under", "a folder, relative to the root", "explore"),),
        {"under": _folders},
    ),
    ToolDefinition(
        "files.search",
        "Literal, case-sensitive search; matching files are captured.",
        _search,
        (Parameter("query", "a task query, marker or generated query", "explore"),),
        {"query": _queries},
        effect="capture",
    ),
    ToolDefinition(
        "files.read",
        "Capture one plain file listed or matched before.",
        _read_file,
        (Parameter("path", "a file path, relative to the root", "explore"),),
        {"path": _known_files},
        effect="capture",
    ),
)


# --- the evidence tools, over a store -------------------------------------------------------


def _refs(store: EvidenceStore, _parent: str | None) -> list[CandidateValue]:
    return [CandidateValue(c.ref, f"{c.source} ({c.length} chars)") for c in store.references()]


def _offsets(store: EvidenceStore, ref: str | None) -> list[CandidateValue]:
    if ref is None:
        return []
    length = store.describe(ref).length
    return [
        CandidateValue(str(at), f"characters {at}–{min(length, at + MAX_READ_CHARS)}")
        for at in range(0, max(length, 1), MAX_READ_CHARS)
    ]


def _read(store: EvidenceStore, values: Mapping[str, str]) -> JsonValue:
    return _dump(store.window(values["ref"], int(values["offset"])))


def _passage_pages(store: EvidenceStore, ref: str | None) -> list[CandidateValue]:
    if ref is None:
        return []
    count = len(store.chunk_options(ref))
    return [
        CandidateValue(
            str(page),
            f"passages {page * PASSAGES_PER_PAGE + 1}–"
            f"{min(count, (page + 1) * PASSAGES_PER_PAGE)} of {count}",
        )
        for page in range(max(1, -(-count // PASSAGES_PER_PAGE)))
    ]


def _passage_page(store: EvidenceStore, values: Mapping[str, str]) -> JsonValue:
    passages = store.chunk_options(values["ref"])
    number = int(values["page"])
    shown = passages[number * PASSAGES_PER_PAGE : (number + 1) * PASSAGES_PER_PAGE]
    return {
        "ref": values["ref"],
        "page": number,
        "pages": max(1, -(-len(passages) // PASSAGES_PER_PAGE)),
        "passages": [_dump(passage) for passage in shown],
    }


_CAPTURE = Parameter("ref", "a stored capture", "explore")
_READ_EVIDENCE: ToolDefinition[EvidenceStore] = ToolDefinition(
    "read_evidence",
    f"Read at most {MAX_READ_CHARS:,} characters of a stored capture.",
    _read,
    (_CAPTURE, Parameter("offset", "where to start", "explore", depends_on="ref")),
    {"ref": _refs, "offset": _offsets},
)
_EVIDENCE_TOOLS: tuple[ToolDefinition[EvidenceStore], ...] = (
    _READ_EVIDENCE,
    ToolDefinition(
        "evidence_page",
        f"List one page of a stored capture's passages ({PASSAGES_PER_PAGE} per page): "
        "their ids, offsets and previews.",
        _passage_page,
        (_CAPTURE, Parameter("page", "a page of passages", "explore", depends_on="ref")),
        {"ref": _refs, "page": _passage_pages},
    ),
    _READ_EVIDENCE.older_name("evidence.read"),
)


def evidence_tools(store: EvidenceStore) -> list[Tool]:
    """``read_evidence`` and ``evidence_page`` over ``store`` (and ``evidence.read``)."""
    return [definition.bind(store) for definition in _EVIDENCE_TOOLS]


# --- the task's tools -----------------------------------------------------------------------


class RecordingTask(Protocol):
    """What ``record_evidence`` and ``save_report`` need of a task: its store and
    categories, the passages it would record, recording one, and saving the report."""

    @property
    def store(self) -> EvidenceStore:
        """Where the task's captures are."""
        ...

    @property
    def markers(self) -> dict[str, str]:
        """The task's categories: label → marker."""
        ...

    def record_options(self, category: str) -> tuple[Passage, ...]:
        """Passages that pass ``category``'s check and are not recorded for it yet."""
        ...

    def record(self, category: str, passage_id: str) -> EvidenceRecord:
        """Record passage ``passage_id`` as a quote for ``category``."""
        ...

    def save(self) -> ArtifactReceipt:
        """Write the report to a new file and return its receipt."""
        ...


def _categories(task: RecordingTask, _parent: str | None) -> list[CandidateValue]:
    return [CandidateValue(label, f"{label}: {marker}") for label, marker in task.markers.items()]


def _recordable(task: RecordingTask, category: str | None) -> list[CandidateValue]:
    if category is None:
        return []
    return [
        CandidateValue(p.passage_id, f"{task.store.describe(p.ref).source} · {p.preview}")
        for p in task.record_options(category)
    ]


def _record(task: RecordingTask, values: Mapping[str, str]) -> JsonValue:
    return _dump(task.record(values["category"], values["passage"]))


async def _save(task: RecordingTask, _values: Mapping[str, str]) -> JsonValue:
    return _dump(await asyncio.to_thread(task.save))


_RECORD_EVIDENCE: ToolDefinition[RecordingTask] = ToolDefinition(
    "record_evidence",
    "Record a passage that passes a category's check as that category's quote.",
    _record,
    (
        Parameter("category", "a category label"),
        Parameter("passage", "a passage", depends_on="category"),
    ),
    {"category": _categories, "passage": _recordable},
    effect="record",
)
_SAVE_REPORT: ToolDefinition[RecordingTask] = ToolDefinition(
    "save_report",
    "Save the report to the task's new output file (never overwrites).",
    _save,
    effect="save",
)
_TASK_TOOLS: tuple[ToolDefinition[RecordingTask], ...] = (
    _RECORD_EVIDENCE,
    _SAVE_REPORT,
    _RECORD_EVIDENCE.older_name("evidence.record"),
    _SAVE_REPORT.older_name("report.save"),
)


def task_tools(task: RecordingTask) -> list[Tool]:
    """``record_evidence`` and ``save_report`` for ``task`` (and their older names)."""
    return [definition.bind(task) for definition in _TASK_TOOLS]


# --- what the built-in tools are called -----------------------------------------------------

#: Every built-in tool, in contract order (a task offers those its toolkits install).
BUILTIN_TOOLS: tuple[ToolDefinition[Any], ...] = (
    *_WEB_TOOLS,
    *_WORKSPACE_TOOLS,
    *_EVIDENCE_TOOLS,
    *_TASK_TOOLS,
)
#: The built-in tools' advertised names, in contract order (a caller's toolkits add their own).
TOOL_NAMES: tuple[str, ...] = tuple(tool.name for tool in BUILTIN_TOOLS if tool.advertised)
#: Older tool name → the advertised tool that does its job (callable for one release).
ALIASES: dict[str, str] = {
    tool.name: tool.older_name_of for tool in BUILTIN_TOOLS if tool.older_name_of is not None
}
