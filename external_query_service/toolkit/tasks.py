"""``EvidenceTask``: one task file + validated inputs → tools, records, checks, a saved report.

The task owns a store, its source tools (web, browser or workspace, bounded by the inputs
and the task's budget; ``browser`` is the web tools over pages a headless Chromium rendered,
``browser.pages.BrowserPages``, in the caller's named session and tab when given), the
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
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from ..clock import Clock, system_clock
from ..digests import sha256_digest
from ..settings import NetworkSettings
from ..store import EvidenceStore, Passage
from .errors import BoundaryRefused, BudgetExhausted, ToolkitError
from .fsguard import SafeRoot, split_relpath
from .reports import (
    ArtifactReceipt,
    CategoryCheck,
    EvidenceRecord,
    ReportSource,
    TaskIdentity,
    TaskReport,
    report_bytes,
)
from .taskfile import (
    TaskInputs,
    TaskSpec,
    load_inputs,
    load_task,
    resolve_inputs,
    validate_inputs,
)
from .web import WebBudget, WebTools
from .workspace import WorkspaceLimits, WorkspaceTools

if TYPE_CHECKING:
    from ..browser.provider import BrowserProvider

__all__ = [
    "MAX_REPORT_BYTES",
    "CollectionSummary",
    "EvidenceTask",
    "Failure",
]

#: A saved report is never larger than this when read back for a receipt.
MAX_REPORT_BYTES = 50_000_000


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Failure(_Frozen):
    """A target a collection step could not use, and why."""

    target: str
    reason: str


class CollectionSummary(_Frozen):
    """What ``collect()`` did: captures made, records kept, what failed, why it stopped."""

    pages: int
    bytes: int
    files_read: int
    searches: int
    records: int
    failures: tuple[Failure, ...]
    stopped_by: str | None


class EvidenceTask:
    """A task ready to run (see the module docstring).

    ``inputs`` are checked against ``spec`` (``InputError`` when they do not fit);
    ``task_dir`` anchors ``reports_dir``; ``base_dir`` anchors a relative ``root``. A
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
        budget = spec.budget
        self.web: WebTools | None = None
        self.files: WorkspaceTools | None = None
        web_budget = WebBudget(max_pages=budget.max_pages, max_bytes=budget.max_bytes)
        if spec.source == "web":
            self.web = WebTools.from_network(
                network or NetworkSettings(),
                self.store,
                resolved.allowed_origins,
                budget=web_budget,
            )
        elif spec.source == "browser":
            from ..browser.pages import BrowserPages

            pages = BrowserPages(browser, session=browser_session, tab=browser_tab, network=network)
            self.web = WebTools.owning(
                pages, self.store, resolved.allowed_origins, budget=web_budget
            )
        else:
            assert resolved.root is not None  # resolve_inputs guarantees it
            self.files = WorkspaceTools(
                resolved.root,
                self.store,
                limits=WorkspaceLimits(
                    max_files=budget.max_files, max_file_bytes=budget.max_file_bytes
                ),
            )
        self._records: list[EvidenceRecord] = []
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
        """Passages of this task's captures (or of capture ``ref``) that hold ``category``'s
        marker and are not yet recorded for it."""
        marker = self._marker(category)
        taken = {(item.ref, item.offset) for item in self._records if item.category == category}
        refs = self.captured_refs() if ref is None else (ref,)
        return tuple(
            passage
            for ref in refs
            for passage in self.store.passage_options(ref)
            if (ref, passage.offset) not in taken
            and marker in self.store.quote(ref, passage.offset, passage.length)
        )

    def record(self, category: str, passage_id: str) -> EvidenceRecord:
        """Quote passage ``passage_id`` for ``category``; it must hold the marker."""
        marker = self._marker(category)
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
        if marker not in quote:
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
            marker = self.inputs.markers[category]
            mine = [item for item in self._records if item.category == category]
            check = CategoryCheck(category=category, passed=False, reason="no_record")
            for item in mine:
                stored = self.store.quote(item.ref, item.offset, item.length)
                if stored != item.quote:
                    reason = "quote_mismatch"
                elif marker not in stored:
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
        """Close the task's web tools, when it has them."""
        if self.web is not None:
            await self.web.aclose()
