"""``EvidenceTask``: one task file + validated inputs → tools, records, checks, a saved report.

The task owns a store, its source tools (web, browser or workspace, bounded by the inputs
and the task's budget; ``browser`` is the web tools over pages a headless Chromium rendered,
``browser._pages.BrowserPages``, in the caller's named session and tab when given), the
records (quotes per category), and the report. ``collect()`` gathers evidence without any
model: the entry page and then observed links inside the origins, breadth first (or the
workspace queries), recording every passage that holds a category's marker. Callers (or
an agent through ``ToolkitSession``) can instead drive the same tools one step at a time
and record passages themselves.
"""

from __future__ import annotations

import asyncio
import collections
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from .._clock import Clock, system_clock
from .._digests import sha256_digest
from .._evidence_store import EvidenceStore, Passage
from .._frozen import Frozen
from ..errors import BoundaryRefused, BudgetExhausted, TaskDefinitionError, ToolkitError
from ..settings import NetworkSettings
from ._contracts import CaptureSummary
from ._fsguard import SafeRoot, split_relpath
from ._kits import WebToolkit, WorkspaceToolkit, evidence_tools, task_tools
from ._reports import (
    ArtifactReceipt,
    CategoryCheck,
    EvidenceRecord,
    ReportSource,
    TaskIdentity,
    TaskReport,
    report_bytes,
)
from ._taskfile import (
    RuntimeInputs,
    TaskInputs,
    TaskSpec,
    load_inputs,
    load_task,
    resolve_inputs,
    validate_inputs,
)
from ._tools import GeneratorContext, PoolSet, Tool, Toolkit, TrustedGenerator
from ._web import WebBudget, WebTools
from ._workspace import WorkspaceLimits, WorkspaceTools

if TYPE_CHECKING:
    from ..browser._provider import BrowserProvider

__all__ = [
    "MAX_REPORT_BYTES",
    "CollectionSummary",
    "EvidenceTask",
    "Failure",
    "MarkerVerifier",
    "Verifier",
]

#: A saved report is never larger than this when read back for a receipt.
MAX_REPORT_BYTES = 50_000_000


class Failure(Frozen):
    """A target a collection step could not use, and why."""

    target: str
    reason: str


class CollectionSummary(Frozen):
    """What ``collect()`` did: captures made, records kept, what failed, why it stopped."""

    pages: int
    bytes: int
    files_read: int
    searches: int
    records: int
    failures: tuple[Failure, ...]
    stopped_by: str | None


class Verifier(Protocol):
    """The caller's check of a recorded passage: ``record_checks`` maps each category label
    to a function of the passage text that returns a strict ``bool`` (anything but
    ``True`` fails). Only passages that pass are offered for recording."""

    @property
    def record_checks(self) -> Mapping[str, Callable[[str], object]]:
        """Category label → the check of a passage's text."""
        ...


class MarkerVerifier:
    """The default verifier: a passage backs a category when it holds the category's
    marker, as a literal, case-sensitive match."""

    def __init__(self, markers: Mapping[str, str]) -> None:
        self.markers = dict(markers)

    @property
    def record_checks(self) -> Mapping[str, Callable[[str], object]]:
        """Category label → "the text holds the marker"."""
        return {label: _holds(marker) for label, marker in self.markers.items()}


def _holds(marker: str) -> Callable[[str], bool]:
    return lambda text: marker in text


class EvidenceTask:
    """A task ready to run (see the module docstring).

    ``inputs`` are checked against ``spec`` (``InputError`` when they do not fit);
    ``task_dir`` anchors ``reports_dir``; ``base_dir`` anchors a relative ``root``.
    ``toolkits`` replaces the source toolkit the spec implies (a task script passes its
    own); ``extra_toolkits`` are installed after it. ``verifier`` checks passages (the
    inputs' markers by default). The shared evidence tools are always installed last. A
    ``browser`` task renders in ``browser`` (None: a provider of its own, closed with the
    task), in session ``browser_session`` and tab ``browser_tab`` when the caller names
    them: a named tab is reused and left open; tabs the task opened are closed by
    ``aclose``.
    """

    def __init__(
        self,
        spec: TaskSpec,
        inputs: TaskInputs | dict[str, Any],
        *,
        task_dir: Path,
        base_dir: Path | None = None,
        network: NetworkSettings | None = None,
        store: EvidenceStore | None = None,
        clock: Clock | None = None,
        toolkits: Sequence[Toolkit] | None = None,
        extra_toolkits: Sequence[Toolkit] = (),
        verifier: Verifier | None = None,
        browser: BrowserProvider | None = None,
        browser_session: str | None = None,
        browser_tab: str | None = None,
    ) -> None:
        self.spec = spec
        resolved = resolve_inputs(spec, inputs, base_dir=base_dir or Path.cwd())
        given = inputs if isinstance(inputs, TaskInputs) else validate_inputs(inputs)
        self.inputs_digest = given.digest
        self.inputs = resolved
        self.store = store if store is not None else EvidenceStore()
        self.clock = clock or system_clock
        # Reports are written below the task's folder, through SafeRoot: the reports folder
        # and any folder inside it are created on save, never followed through a symlink.
        self.reports = SafeRoot(task_dir)
        self._report_relpath = "/".join(
            (*split_relpath(spec.reports_dir), *split_relpath(resolved.output))
        )
        self.network = network or NetworkSettings()
        # The caller's session and tab: named here, or in the inputs (run-task, mcp --task).
        self._browser = (browser, browser_session or resolved.session, browser_tab or resolved.tab)
        self.verifier: Verifier = verifier or MarkerVerifier(resolved.markers)
        self._check_verifier()
        self._records: list[EvidenceRecord] = []
        self._adopted: dict[str, None] = {}
        self._tools: dict[str, Tool] = {}
        self._pools = PoolSet()
        self.toolkits: tuple[Toolkit, ...] = (
            *(self._source_toolkits() if toolkits is None else toolkits),
            *extra_toolkits,
        )
        names: list[str] = []
        for toolkit in self.toolkits:
            if not isinstance(toolkit, Toolkit):
                raise TaskDefinitionError(
                    f"{toolkit!r} is not a toolkit (name, observe(), install(task))"
                )
            if toolkit.name in names:
                raise TaskDefinitionError(f"two toolkits are named {toolkit.name!r}")
            names.append(toolkit.name)
            toolkit.install(self)
        for tool in (*evidence_tools(self.store), *task_tools(self)):
            self.add_tool(tool)
        self._saved: tuple[TaskReport, str] | None = None  # the report saved, its digest

    @classmethod
    def from_files(
        cls,
        task_path: str | Path,
        inputs_path: str | Path,
        *,
        network: NetworkSettings | None = None,
        store: EvidenceStore | None = None,
        clock: Clock | None = None,
    ) -> EvidenceTask:
        """A task from a task file and a runtime-inputs file (read by ``load_task`` and
        ``load_inputs``)."""
        spec, task_dir = load_task(task_path)
        inputs, base_dir = load_inputs(inputs_path)
        return cls(
            spec,
            inputs,
            task_dir=task_dir,
            base_dir=base_dir,
            network=network,
            store=store,
            clock=clock,
        )

    @classmethod
    def from_inputs(
        cls,
        inputs: RuntimeInputs,
        *,
        toolkits: Sequence[Toolkit] | None = None,
        verifier: Verifier | None = None,
        store: EvidenceStore | None = None,
    ) -> EvidenceTask:
        """The task a script's ``build(inputs)`` registers: the script's declaration and
        checked inputs, its ``toolkits`` (the source toolkit its kind implies when None),
        its ``verifier`` and its ``store`` (by default the one the runner shares)."""
        return cls(
            inputs.spec,
            inputs.task_inputs,
            task_dir=inputs.task_dir,
            base_dir=inputs.base_dir,
            network=inputs.network,
            store=store if store is not None else inputs.store,
            clock=inputs.clock,
            toolkits=toolkits,
            verifier=verifier,
        )

    def _source_toolkits(self) -> tuple[Toolkit, ...]:
        """The toolkit the spec's ``source`` implies, bounded by the inputs and the budget."""
        budget, inputs = self.spec.budget, self.inputs
        if self.spec.source in ("web", "browser"):
            assert inputs.url is not None  # resolve_inputs guarantees it
            web_budget = WebBudget(max_pages=budget.max_pages, max_bytes=budget.max_bytes)
            rendered = self._browser_tools(web_budget) if self.spec.source == "browser" else None
            return (
                WebToolkit(
                    inputs.url,
                    inputs.allowed_origins,
                    budget=web_budget,
                    network=self.network,
                    tools=rendered,
                ),
            )
        assert inputs.root is not None  # resolve_inputs guarantees it
        limits = WorkspaceLimits(max_files=budget.max_files, max_file_bytes=budget.max_file_bytes)
        return (WorkspaceToolkit(inputs.root, inputs.queries, limits=limits),)

    def _browser_tools(self, budget: WebBudget) -> WebTools:
        """Web tools over pages the browser renders, in the caller's session and tab."""
        from ..browser._pages import BrowserPages

        browser, session, tab = self._browser
        pages = BrowserPages(browser, session=session, tab=tab, network=self.network)
        return WebTools.owning(pages, self.store, self.inputs.allowed_origins, budget=budget)

    def _check_verifier(self) -> None:
        checks = self.verifier.record_checks
        missing = [label for label in self.inputs.markers if label not in checks]
        if missing:
            raise TaskDefinitionError(f"the verifier has no record check for {', '.join(missing)}")

    # -- tools and toolkits ----------------------------------------------------------------
    def add_tool(self, tool: Tool) -> None:
        """Register ``tool`` (a toolkit's ``install`` calls this); names are unique."""
        if not isinstance(tool, Tool):
            raise TaskDefinitionError(f"{tool!r} is not a Tool")
        if tool.name in self._tools:
            raise TaskDefinitionError(f"two tools are named {tool.name!r}")
        self._tools[tool.name] = tool

    def tools(self) -> tuple[Tool, ...]:
        """Every registered tool, advertised or not, in registration order."""
        return tuple(self._tools.values())

    def register_generator(self, generator: TrustedGenerator) -> None:
        """Add a trusted generator: its checked output joins the pool ``generator.pool``."""
        if not isinstance(generator, TrustedGenerator):
            raise TaskDefinitionError(f"{generator!r} is not a TrustedGenerator")
        self._pools.register(generator)

    def pool(self, name: str) -> tuple[str, ...]:
        """The candidate pool ``name``, refreshed once per new capture or record."""
        version = (len(self.store), len(self._records))
        self._pools.refresh(version, self._generator_context)
        return self._pools.values(name)

    @property
    def pools_rejected(self) -> dict[str, int]:
        """Generated items refused by the check (or over a bound), by pool."""
        return dict(self._pools.rejected)

    def _generator_context(self) -> GeneratorContext:
        latest = self.store.references()[-8:]
        return GeneratorContext(
            markers=dict(self.inputs.markers),
            captures=tuple(
                CaptureSummary(
                    ref=c.ref, source=c.source, length=c.length, digest=c.digest, summary=c.summary
                )
                for c in latest
            ),
            records=len(self._records),
        )

    def adopt(self, refs: Sequence[str]) -> None:
        """Count captures a caller's tool made as this task's (so they can be recorded)."""
        self._adopted.update(dict.fromkeys(ref for ref in refs if ref in self._stored()))

    def _stored(self) -> set[str]:
        return {capture.ref for capture in self.store.references()}

    @property
    def web(self) -> WebTools | None:
        """The web tools of the first web toolkit, if any."""
        kit = next((k for k in self.toolkits if isinstance(k, WebToolkit)), None)
        return kit.tools if kit is not None else None

    @property
    def files(self) -> WorkspaceTools | None:
        """The workspace tools of the first workspace toolkit, if any."""
        kit = next((k for k in self.toolkits if isinstance(k, WorkspaceToolkit)), None)
        return kit.tools if kit is not None else None

    # -- what the task holds ---------------------------------------------------------------
    @property
    def markers(self) -> dict[str, str]:
        """The inputs' categories: marker → description."""
        return dict(self.inputs.markers)

    @property
    def required(self) -> tuple[str, ...]:
        """The categories that must hold a record (all of them unless the task names some)."""
        return self.spec.required or tuple(self.inputs.markers)

    @property
    def output_path(self) -> Path:
        """Where ``save`` writes the report."""
        return self.reports.path / self._report_relpath

    def captured_refs(self) -> tuple[str, ...]:
        """References this task's tools captured, in capture order."""
        refs: list[str] = []
        if self.web is not None:
            refs += [page.ref for page in self.web.pages()]
        if self.files is not None:
            refs += [capture.ref for capture in self.files.captures()]
        refs += list(self._adopted)
        return tuple(dict.fromkeys(refs))

    def records(self) -> tuple[EvidenceRecord, ...]:
        """The evidence records made so far, in order."""
        return tuple(self._records)

    @property
    def saved_digest(self) -> str | None:
        """sha256 of the bytes this task saved (None before ``save``)."""
        return self._saved[1] if self._saved else None

    # -- recording ---------------------------------------------------------------------------
    def record_options(self, category: str, *, ref: str | None = None) -> tuple[Passage, ...]:
        """Passages of this task's captures (or of capture ``ref``) that pass ``category``'s
        record check and are not yet recorded for it."""
        self._marker(category)
        taken = {(item.ref, item.offset) for item in self._records if item.category == category}
        refs = self.captured_refs() if ref is None else (ref,)
        return tuple(
            passage
            for ref in refs
            for passage in self.store.chunk_options(ref)
            if (ref, passage.offset) not in taken
            and self._passes(category, self.store.quote(ref, passage.offset, passage.length))
        )

    def _passes(self, category: str, text: str) -> bool:
        """The verifier's check of ``text`` for ``category``: only a strict ``True`` passes."""
        check = self.verifier.record_checks.get(category)
        return check is not None and check(text) is True

    def record(self, category: str, passage_id: str) -> EvidenceRecord:
        """Quote passage ``passage_id`` for ``category``; it must pass the category's check."""
        self._marker(category)
        try:
            passage = self.store.passage(passage_id)
        except KeyError:
            raise BoundaryRefused(
                f"unknown passage {passage_id}", reason="unknown_passage"
            ) from None
        if passage.ref not in self.captured_refs():
            raise BoundaryRefused(
                f"{passage_id} is not from a capture of this task", reason="not_captured_by_task"
            )
        quote = self.store.quote(passage.ref, passage.offset, passage.length)
        if not self._passes(category, quote):
            raise ToolkitError(
                f"passage {passage_id} does not contain the marker of {category!r}",
                reason="marker_not_in_passage",
            )
        for existing in self._records:
            if (existing.category, existing.ref, existing.offset) == (
                category,
                passage.ref,
                passage.offset,
            ):
                return existing
        if self._count(category) >= self.spec.budget.max_records_per_category:
            raise BudgetExhausted(
                f"{category!r} already has {self._count(category)} records", reason="record_budget"
            )
        record = EvidenceRecord(
            category=category,
            ref=passage.ref,
            offset=passage.offset,
            length=passage.length,
            quote=quote,
            source=self.store.describe(passage.ref).source,
        )
        self._records.append(record)
        return record

    def checks(self) -> tuple[CategoryCheck, ...]:
        """One strict check per required category, against the stored text itself."""
        results = []
        for category in self.required:
            mine = [item for item in self._records if item.category == category]
            check = CategoryCheck(category=category, passed=False, reason="no_record")
            for item in mine:
                stored = self.store.quote(item.ref, item.offset, item.length)
                if stored != item.quote:
                    reason = "quote_mismatch"
                elif not self._passes(category, stored):
                    reason = "marker_missing"
                else:
                    reason = "quote_verified"
                check = CategoryCheck(
                    category=category,
                    passed=reason == "quote_verified",
                    reason=reason,
                    ref=item.ref,
                    offset=item.offset,
                    length=item.length,
                )
                if check.passed:
                    break
            results.append(check)
        return tuple(results)

    # -- the report --------------------------------------------------------------------------
    def report(self) -> TaskReport:
        """The report as it stands now (``created_at`` is the save time once saved)."""
        sources = []
        for ref in self.captured_refs():
            capture = self.store.describe(ref)
            sources.append(
                ReportSource(
                    ref=ref, source=capture.source, digest=capture.digest, length=capture.length
                )
            )
        return TaskReport(
            task=TaskIdentity(
                name=self.spec.name, source=self.spec.source, digest=self.spec.digest
            ),
            inputs_digest=self.inputs_digest,
            records=self.records(),
            checks=self.checks(),
            sources=tuple(sources),
            created_at=self._saved[0].created_at if self._saved else self.clock(),
        )

    def check_output_free(self) -> None:
        """``BoundaryRefused(reason="output_exists")`` when something is at the output path."""
        if os.path.lexists(self.output_path):
            raise BoundaryRefused(
                f"{self.inputs.output} already exists in the reports folder; "
                "reports are never overwritten",
                reason="output_exists",
            )

    def save(self) -> ArtifactReceipt:
        """Write the report to a new file (never overwriting) and return its receipt."""
        report = self.report()
        data = report_bytes(report)
        self.reports.create_new(self._report_relpath, data)
        self._saved = (report, sha256_digest(data))
        return self.artifact_receipt()

    def artifact_receipt(self) -> ArtifactReceipt:
        """Path, exists, matches (saved bytes == the report held now), records, digest, sources."""
        exists = os.path.lexists(self.output_path)
        matches = False
        if exists and self._saved is not None:
            try:
                saved = self.reports.read_bytes(self._report_relpath, MAX_REPORT_BYTES)
            except ToolkitError:
                saved = None
            matches = saved == report_bytes(self.report())
        return ArtifactReceipt(
            path=str(self.output_path),
            exists=exists,
            matches=matches,
            record_count=len(self._records),
            digest=self._saved[1] if self._saved else None,
            sources=tuple(self.store.describe(ref).source for ref in self.captured_refs()),
        )

    # -- collecting without a model ------------------------------------------------------
    async def collect(self) -> CollectionSummary:
        """Gather evidence within the budget and record every passage holding a marker."""
        failures: list[Failure] = []
        stopped_by: str | None = None
        searches = 0
        if self.web is not None:
            stopped_by = await self._crawl(self.web, failures)
        elif self.files is not None:
            searches = await self._search(self.files, failures)
        return CollectionSummary(
            pages=self.web.usage.pages if self.web else 0,
            bytes=self.web.usage.bytes if self.web else 0,
            files_read=len(self.files.captures()) if self.files else 0,
            searches=searches,
            records=len(self._records),
            failures=tuple(failures),
            stopped_by=stopped_by,
        )

    async def _crawl(self, web: WebTools, failures: list[Failure]) -> str | None:
        assert self.inputs.url is not None
        queue: collections.deque[tuple[str | None, str, int]] = collections.deque(
            [(None, self.inputs.url, 0)]
        )
        seen: set[str] = set()
        while queue and not self._full():
            link_id, url, depth = queue.popleft()
            if url in seen:
                continue
            seen.add(url)
            try:
                page = await (web.open(url) if link_id is None else web.follow(link_id))
            except BudgetExhausted as exc:
                return exc.reason
            except ToolkitError as exc:
                failures.append(Failure(target=url, reason=exc.reason))
                continue
            seen.add(page.final_url)
            self._record_markers(page.ref)
            if depth < self.spec.budget.max_depth:
                queue.extend(
                    (link.link_id, link.url, depth + 1)
                    for link in web.links(page.ref)
                    if link.url not in seen
                )
        return None

    async def _search(self, files: WorkspaceTools, failures: list[Failure]) -> int:
        queries = self.inputs.queries or tuple(dict.fromkeys(self.inputs.markers.values()))
        for query in queries:
            try:
                result = await asyncio.to_thread(files.search, query)
            except ToolkitError as exc:
                failures.append(Failure(target=query, reason=exc.reason))
                continue
            for ref in dict.fromkeys(match.ref for match in result.matches):
                self._record_markers(ref)
        return len(queries)

    def _record_markers(self, ref: str) -> None:
        for category in self.inputs.markers:
            for passage in self.record_options(category, ref=ref):
                if self._count(category) >= self.spec.budget.max_records_per_category:
                    break
                self.record(category, passage.passage_id)

    def _full(self) -> bool:
        limit = self.spec.budget.max_records_per_category
        return all(self._count(category) >= limit for category in self.inputs.markers)

    def _count(self, category: str) -> int:
        return sum(1 for item in self._records if item.category == category)

    def _marker(self, category: str) -> str:
        try:
            return self.inputs.markers[category]
        except KeyError:
            raise ToolkitError(
                f"unknown category {category!r}; categories: {', '.join(self.inputs.markers)}",
                reason="unknown_category",
            ) from None

    async def aclose(self) -> None:
        """Close the task's web tools, and any toolkit that has an ``aclose``."""
        for toolkit in self.toolkits:
            closing = getattr(toolkit, "aclose", None)
            if closing is not None:
                await closing()
