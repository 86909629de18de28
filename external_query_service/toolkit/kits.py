"""The built-in toolkits and the shared evidence tools, built on the ``Tool`` protocol.

- ``WebToolkit`` (``web``): ``web.open_link`` (the task's entry, then links a captured page
  showed) and ``web.read_section``; ``WebTools`` does the bounded fetching.
- ``WorkspaceToolkit`` (``files``): ``files.list``, ``files.search``, ``files.read`` over
  ``WorkspaceTools``.
- ``evidence_tools(store)``: ``read_evidence`` (a window of a capture) and ``evidence_page``
  (a page of a capture's passages); a session without a task offers only these.
- ``task_tools(task)``: ``record_evidence`` and ``save_report``.

The older names (``web.open``, ``web.links``, ``web.follow``, ``evidence.read``,
``evidence.record``, ``report.save``) stay callable for one release, as unadvertised tools:
an observation, the MCP ``tool`` enum and a delegated model never see them.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterable, Mapping
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from pydantic import BaseModel, JsonValue

from ..runtime.evidence_store import MAX_READ_CHARS, EvidenceStore
from ..settings import NetworkSettings
from .tools import CandidateValue, Parameter, Tool, ToolRegistry
from .web import WebBudget, WebTools
from .workspace import WorkspaceLimits, WorkspaceTools

if TYPE_CHECKING:
    from .tasks import EvidenceTask

__all__ = [
    "ALIASES",
    "PASSAGES_PER_PAGE",
    "WebToolkit",
    "WorkspaceToolkit",
    "evidence_tools",
    "task_tools",
]

#: Passages per ``evidence_page`` page.
PASSAGES_PER_PAGE = 10
#: Older tool name → the advertised tool that does its job (callable for one release).
ALIASES: dict[str, str] = {
    "web.open": "web.open_link",
    "web.follow": "web.open_link",
    "web.links": "web.open_link",
    "evidence.read": "read_evidence",
    "evidence.record": "record_evidence",
    "report.save": "save_report",
}


def _hidden(tool: Tool, name: str) -> Tool:
    """``tool`` under an older name, callable but not advertised."""
    return dataclasses.replace(tool, name=name, advertised=False)


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

    @property
    def tools(self) -> WebTools:
        """The web tools (after ``install``)."""
        if self._tools is None:
            raise RuntimeError("WebToolkit.tools before install")
        return self._tools

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
        web = self.tools
        for tool in self._build(web, task.store):
            task.add_tool(tool)

    async def aclose(self) -> None:
        """Close the web tools' fetcher (when they made it)."""
        if self._tools is not None:
            await self._tools.aclose()

    def _entry_open(self, web: WebTools) -> bool:
        return not any(self.url in (page.url, page.final_url) for page in web.pages())

    def _build(self, web: WebTools, store: EvidenceStore) -> list[Tool]:
        def open_links(_parent: str | None) -> list[CandidateValue]:
            entry = (
                [CandidateValue(self.url, f"{self.url} (entry)")] if self._entry_open(web) else []
            )
            return entry + [
                CandidateValue(link.link_id, f"{link.url} {link.text}".strip())
                for link in web.observed_links()
                if link.captured_ref is None
            ]

        async def open_link(values: Mapping[str, str]) -> JsonValue:
            chosen = values["link"]
            known = {link.link_id for link in web.observed_links()}
            page = await (web.follow(chosen) if chosen in known else web.open(chosen))
            return _dump(page)

        def pages(_parent: str | None) -> list[CandidateValue]:
            return [CandidateValue(p.ref, f"{p.final_url} {p.title}".strip()) for p in web.pages()]

        def passages(page: str | None) -> list[CandidateValue]:
            if page is None:
                return []
            return [CandidateValue(p.passage_id, p.preview) for p in store.chunk_options(page)]

        def read_section(values: Mapping[str, str]) -> JsonValue:
            return _dump(web.read_section(values["passage"]))

        def links(values: Mapping[str, str]) -> JsonValue:
            found = web.links(values["page"])
            return {"page": values["page"], "links": [_dump(link) for link in found]}

        async def follow(values: Mapping[str, str]) -> JsonValue:
            return _dump(await web.follow(values["link"]))

        async def open_entry(values: Mapping[str, str]) -> JsonValue:
            return _dump(await web.open(values["url"]))

        page = Parameter("page", "a captured page", "explore")
        return [
            Tool(
                "web.open_link",
                "Capture a page: the task's entry, or a link a captured page showed "
                "(inside the allowed origins).",
                open_link,
                (Parameter("link", "the entry or an observed link not yet opened", "explore"),),
                {"link": open_links},
                effect="capture",
            ),
            Tool(
                "web.read_section",
                "Read one passage of a captured page.",
                read_section,
                (page, Parameter("passage", "a passage", "explore", depends_on="page")),
                {"page": pages, "passage": passages},
            ),
            Tool(
                "web.open",
                "Capture the task's entry page (older name of web.open_link).",
                open_entry,
                (Parameter("url", "the entry URL"),),
                {"url": lambda _p: [CandidateValue(self.url, self.url)]},
                effect="capture",
                advertised=False,
            ),
            Tool(
                "web.links",
                "List the links a captured page showed (web.open_link offers them).",
                links,
                (page,),
                {"page": pages},
                advertised=False,
            ),
            Tool(
                "web.follow",
                "Capture the page an observed link points to (older name of web.open_link).",
                follow,
                (Parameter("link", "a link observed on a captured page", "explore"),),
                {"link": lambda _p: [c for c in open_links(None) if c.value != self.url]},
                effect="capture",
                advertised=False,
            ),
        ]


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
        self._known: dict[str, None] = {}

    @property
    def tools(self) -> WorkspaceTools:
        """The workspace tools (after ``install``)."""
        if self._tools is None:
            raise RuntimeError("WorkspaceToolkit.tools before install")
        return self._tools

    def known_files(self) -> tuple[str, ...]:
        """Paths listed or matched so far (what ``files.read`` offers)."""
        return tuple(self._known)

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
        for tool in self._build(self.tools, task):
            task.add_tool(tool)

    def _build(self, files: WorkspaceTools, task: ToolRegistry) -> list[Tool]:
        def folders(_parent: str | None) -> list[CandidateValue]:
            found = {""} | {str(PurePosixPath(p).parent).removeprefix(".") for p in self._known}
            return [CandidateValue(f, f or "(root)") for f in sorted(found)]

        def queries(_parent: str | None) -> list[CandidateValue]:
            given = (*self.queries, *task.markers.values(), *task.pool("queries"))
            return [CandidateValue(q, q) for q in given]

        async def listing(values: Mapping[str, str]) -> JsonValue:
            found = await asyncio.to_thread(files.list, values["under"])
            self._known.update(dict.fromkeys(item.path for item in found.files))
            return _dump(found)

        async def search(values: Mapping[str, str]) -> JsonValue:
            found = await asyncio.to_thread(files.search, values["query"])
            self._known.update(dict.fromkeys(item.path for item in found.matches))
            return _dump(found)

        async def read(values: Mapping[str, str]) -> JsonValue:
            return _dump(await asyncio.to_thread(files.read, values["path"]))

        return [
            Tool(
                "files.list",
                "List regular files below a folder of the root (links refused).",
                listing,
                (Parameter("under", "a folder, relative to the root", "explore"),),
                {"under": folders},
            ),
            Tool(
                "files.search",
                "Literal, case-sensitive search; matching files are captured.",
                search,
                (Parameter("query", "a task query, marker or generated query", "explore"),),
                {"query": queries},
                effect="capture",
            ),
            Tool(
                "files.read",
                "Capture one plain file listed or matched before.",
                read,
                (Parameter("path", "a file path, relative to the root", "explore"),),
                {"path": lambda _p: [CandidateValue(p, p) for p in self._known]},
                effect="capture",
            ),
        ]


def evidence_tools(store: EvidenceStore) -> list[Tool]:
    """``read_evidence`` and ``evidence_page`` over ``store`` (and ``evidence.read``)."""

    def refs(_parent: str | None) -> list[CandidateValue]:
        return [CandidateValue(c.ref, f"{c.source} ({c.length} chars)") for c in store.references()]

    def offsets(ref: str | None) -> list[CandidateValue]:
        if ref is None:
            return []
        length = store.describe(ref).length
        return [
            CandidateValue(str(at), f"characters {at}–{min(length, at + MAX_READ_CHARS)}")
            for at in range(0, max(length, 1), MAX_READ_CHARS)
        ]

    def pages(ref: str | None) -> list[CandidateValue]:
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

    def read(values: Mapping[str, str]) -> JsonValue:
        return _dump(store.window(values["ref"], int(values["offset"])))

    def page(values: Mapping[str, str]) -> JsonValue:
        passages = store.chunk_options(values["ref"])
        number = int(values["page"])
        shown = passages[number * PASSAGES_PER_PAGE : (number + 1) * PASSAGES_PER_PAGE]
        return {
            "ref": values["ref"],
            "page": number,
            "pages": max(1, -(-len(passages) // PASSAGES_PER_PAGE)),
            "passages": [_dump(passage) for passage in shown],
        }

    capture = Parameter("ref", "a stored capture", "explore")
    reading = Tool(
        "read_evidence",
        f"Read at most {MAX_READ_CHARS:,} characters of a stored capture.",
        read,
        (capture, Parameter("offset", "where to start", "explore", depends_on="ref")),
        {"ref": refs, "offset": offsets},
    )
    return [
        reading,
        Tool(
            "evidence_page",
            f"List one page of a stored capture's passages ({PASSAGES_PER_PAGE} per page): "
            "their ids, offsets and previews.",
            page,
            (capture, Parameter("page", "a page of passages", "explore", depends_on="ref")),
            {"ref": refs, "page": pages},
        ),
        _hidden(reading, "evidence.read"),
    ]


def task_tools(task: EvidenceTask) -> list[Tool]:
    """``record_evidence`` and ``save_report`` for ``task`` (and their older names)."""

    def categories(_parent: str | None) -> list[CandidateValue]:
        return [
            CandidateValue(label, f"{label}: {marker}") for label, marker in task.markers.items()
        ]

    def passages(category: str | None) -> list[CandidateValue]:
        if category is None:
            return []
        return [
            CandidateValue(p.passage_id, f"{task.store.describe(p.ref).source} · {p.preview}")
            for p in task.record_options(category)
        ]

    def record(values: Mapping[str, str]) -> JsonValue:
        return _dump(task.record(values["category"], values["passage"]))

    async def save(_values: Mapping[str, str]) -> JsonValue:
        return _dump(await asyncio.to_thread(task.save))

    recording = Tool(
        "record_evidence",
        "Record a passage that passes a category's check as that category's quote.",
        record,
        (
            Parameter("category", "a category label"),
            Parameter("passage", "a passage", depends_on="category"),
        ),
        {"category": categories, "passage": passages},
        effect="record",
    )
    saving = Tool(
        "save_report",
        "Save the report to the task's new output file (never overwrites).",
        save,
        effect="save",
    )
    return [
        recording,
        saving,
        _hidden(recording, "evidence.record"),
        _hidden(saving, "report.save"),
    ]
