"""Local documentation: search a configured folder of ``.md``, ``.txt`` and ``.html`` files.

The folder is a boundary. Nothing outside it is read: symlinks (to files or folders) are
refused, the walk never follows links and opens each file relative to its already-opened
folder with ``O_NOFOLLOW``, only regular files are read (a FIFO would block a plain
``open``), and every file and the number of files are capped. Evidence addresses files as
``docs://<adapter id>/<relative path>`` so no machine path ever leaves the adapter.

The root itself is pinned the first time it is seen as a folder (when the adapter is built,
or at the first gather if the folder appeared later), through the workspace tools'
``SafeRoot``: resolved once, identified by device and inode, and every walk starts from a
descriptor checked against that identity. A root that is later renamed away and replaced
(by a symlink to another folder, or by another folder) fails the gather with
``root_changed`` instead of answering from whatever now sits at the path.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import stat
import threading
from dataclasses import dataclass, field
from datetime import UTC
from pathlib import Path, PurePosixPath
from typing import ClassVar
from urllib.parse import quote

from pydantic import JsonValue

from .._digests import sha256_digest
from ..errors import ExtractionFailed, SettingsError, ToolkitError
from ..models import Evidence, ExternalQueryPlan, ProviderType, Readiness
from ..settings import AdapterSettings
from ..text._chunk import Chunk, chunk_text
from ..text._decode import decode_body
from ..text._extract import extract_page, normalize_text
from ..text._score import MIN_SCORE, best_snippets
from ..toolkit._fsguard import SafeRoot
from ._base import Adapter, AdapterOutcome, AdapterRuntime, evidence_id

__all__ = [
    "MAX_EVIDENCE",
    "MAX_FILES",
    "MEDIA_TYPES",
    "MIN_SCORE_BPS",
    "LocalDocsAdapter",
]

#: File types read, by suffix, with the media type the decoder and extractor expect.
MEDIA_TYPES = {
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".txt": "text/plain",
    ".html": "text/html",
    ".htm": "text/html",
}
#: More files than this are left unread (and counted in the outcome's detail).
MAX_FILES = 2000
#: Evidence kept per gather: the best snippets overall, at most one per file.
MAX_EVIDENCE = 3
#: A snippet must score at least this (basis points) to count as a match: the same floor
#: the web chain uses, so a doc match means what a page match means.
MIN_SCORE_BPS = MIN_SCORE

_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
#: An ATX heading line (``# Title``), the markdown structure that names a document. Spaces
#: around the title and the optional closing ``#`` run are stripped in Python: unbounded
#: runs over the same characters side by side (``[ \t]+(.+?)[ \t]*#*``) backtrack
#: polynomially on a long line of spaces (a file is untrusted input, and a pattern on the
#: evidence path must run in linear time); this has one run per line.
_HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]([^\n]*)$", re.MULTILINE)


@dataclass(frozen=True)
class _Doc:
    """One file as read and prepared: normalized text, chunks, and where it came from."""

    relpath: str  # POSIX, relative to the root
    title: str
    text: str
    raw_digest: str
    chunks: tuple[Chunk, ...]


@dataclass
class _Scan:
    """What one walk of the root found, including everything it refused or skipped."""

    docs: list[_Doc] = field(default_factory=list)
    keys: set[tuple[str, int, int]] = field(default_factory=set)
    symlinks_refused: int = 0
    non_regular_skipped: int = 0
    too_large: int = 0
    unreadable: int = 0
    not_extracted: int = 0
    files_omitted: int = 0

    def detail(self) -> dict[str, JsonValue]:
        counts = {
            "files_read": len(self.docs),
            "symlinks_refused": self.symlinks_refused,
            "non_regular_skipped": self.non_regular_skipped,
            "too_large": self.too_large,
            "unreadable": self.unreadable,
            "not_extracted": self.not_extracted,
            "files_omitted": self.files_omitted,
        }
        return {key: value for key, value in counts.items() if value or key == "files_read"}


def _markdown_title(text: str) -> str:
    """The text of the first non-empty ATX heading, without a closing ``#`` sequence."""
    for match in _HEADING.finditer(text):
        title = match.group(1).rstrip()
        unclosed = title.rstrip("#")
        if not unclosed or unclosed[-1].isspace():  # CommonMark: "# Title ##" closes
            title = unclosed
        title = title.strip()
        if title:
            return title
    return ""


def _docs_url(adapter_id: str, relpath: str) -> str:
    return f"docs://{quote(adapter_id, safe='')}/{quote(relpath, safe='/')}"


class LocalDocsAdapter(Adapter):
    """Documentation evidence from a local folder (``[[adapters]] root = ...``)."""

    kind: ClassVar[str] = "local_docs"
    provider_type: ClassVar[ProviderType] = "doc_search"
    supported_query_kinds: ClassVar[tuple[str, ...]] = ("documentation",)
    supports_freshness: ClassVar[bool] = False
    supports_page_fetch: ClassVar[bool] = False

    class Options(Adapter.Options):
        #: The documentation folder (relative: to the settings file's folder).
        root: Path

        def endpoints(self) -> None:
            return None  # a local folder is no part of the outside world

    options: Options

    def __init__(self, config: AdapterSettings, runtime: AdapterRuntime) -> None:
        super().__init__(config, runtime)
        # A folder that is not there when the service starts is a settings mistake, said at
        # once; one that vanishes later is a readiness failure (root_missing) of one attempt.
        if not self.options.root.is_dir():
            raise SettingsError(
                f"adapter {self.adapter_id!r} (local_docs): root is not a folder: "
                f"{self.options.root}"
            )
        # (relative path, mtime_ns, size) → prepared document; files are re-read on change.
        self._cache: dict[tuple[str, int, int], _Doc] = {}
        self._cache_lock = threading.Lock()
        self._root: SafeRoot | None = None
        self._root_lock = threading.Lock()
        if self.readiness().ready:
            # Pin now, so a root swapped before the first question is already caught. A
            # folder that is missing or unusable here is left to readiness and gather.
            with contextlib.suppress(ToolkitError):
                self._pinned_root()

    # -- readiness ----------------------------------------------------------------------
    def readiness(self) -> Readiness:
        static = super().readiness()
        if not static.ready:
            return static
        root = self.options.root
        if not root.exists():
            return Readiness(ready=False, reason="root_missing")
        if not root.is_dir():
            return Readiness(ready=False, reason="root_not_directory")
        return Readiness(ready=True)

    async def probe(self) -> Readiness:
        """The folder exists and is a directory (there is nothing remote to ask)."""
        return self.readiness()

    # -- gather -------------------------------------------------------------------------
    async def gather(self, plan: ExternalQueryPlan) -> AdapterOutcome:
        ready = self.readiness()
        if not ready.ready:
            return AdapterOutcome(status="failed", reason=ready.reason or "root_missing")
        # Walking, reading and extracting are blocking; keep them off the event loop.
        try:
            scan = await asyncio.to_thread(self._scan)
        except ToolkitError as exc:
            # root_changed above all: the folder at the path is not the one pinned.
            return AdapterOutcome(status="failed", reason=exc.reason)
        return self._match(plan, scan)

    def _pinned_root(self) -> SafeRoot:
        """The root as first seen (see the module docstring); ``ToolkitError`` when it
        cannot be opened as a folder."""
        with self._root_lock:
            if self._root is None:
                # Resolved once, so an operator's symlinked root still works.
                self._root = SafeRoot(self.options.root)
            return self._root

    def _match(self, plan: ExternalQueryPlan, scan: _Scan) -> AdapterOutcome:
        best: list[tuple[int, str, _Doc, Chunk]] = []  # (score, query, doc, chunk) per file
        for doc in scan.docs:
            if not doc.chunks:
                continue
            top: tuple[int, str, Chunk] | None = None
            for query in plan.search_queries:
                for scored in best_snippets(
                    doc.chunks, query, plan.targets, limit=1, min_score=MIN_SCORE_BPS
                ):
                    if top is None or scored.score > top[0]:
                        top = (scored.score, query, scored.chunk)
            if top is not None:
                best.append((top[0], top[1], doc, top[2]))
        detail = scan.detail()
        if not best:
            return AdapterOutcome(status="empty", reason="no_match", detail=detail)
        # Highest score first; the path breaks ties so the order never depends on the walk.
        best.sort(key=lambda item: (-item[0], item[2].relpath))
        evidence = tuple(
            self._evidence(score, query, doc, chunk)
            for score, query, doc, chunk in best[:MAX_EVIDENCE]
        )
        return AdapterOutcome(status="ok", evidence=evidence, results=len(best), detail=detail)

    def _evidence(self, score: int, query: str, doc: _Doc, chunk: Chunk) -> Evidence:
        url = _docs_url(self.adapter_id, doc.relpath)
        ref = self.runtime.store.put(
            doc.text,
            source=url,
            metadata={"adapter_id": self.adapter_id, "kind": self.kind, "path": doc.relpath},
        )
        content_digest = sha256_digest(doc.text)
        # Quote from the stored text itself, so ``store.quote(ref, offset, length)`` is exact.
        snippet = doc.text[chunk.offset : chunk.offset + chunk.length]
        return Evidence(
            evidence_id=evidence_id(url, content_digest, chunk.offset),
            adapter_id=self.adapter_id,
            provider_type=self.provider_type,
            basis="page_body",
            url=url,
            title=doc.title,
            site=self.adapter_id,
            snippet=snippet,
            score=max(0, min(10_000, score)),
            published_at=None,
            accessed_at=self.runtime.clock().astimezone(UTC),
            content_digest=content_digest,
            raw_digest=doc.raw_digest,
            ref=ref,
            offset=chunk.offset,
            length=len(snippet),
            gathered_for=query,
        )

    # -- the walk -----------------------------------------------------------------------
    def _scan(self) -> _Scan:
        """Read every eligible file under the pinned root, refusing links; ``ToolkitError``
        (``root_changed``) when the folder at the root's path is no longer that root."""
        scan = _Scan()
        seen = 0
        # The walk starts from a descriptor of the pinned root (its identity checked), so
        # it reads that folder even if the path is swapped mid-walk. fwalk hands out an
        # open descriptor for each folder below and never descends into a symlinked one;
        # opening files relative to it closes the gap between check and open.
        with self._pinned_root().open_dir(()) as root_fd:
            for dirpath, dirnames, filenames, dirfd in os.fwalk(
                ".", follow_symlinks=False, dir_fd=root_fd
            ):
                kept_dirs = []
                for name in sorted(dirnames):
                    if name.startswith("."):
                        continue
                    if stat.S_ISLNK(os.lstat(name, dir_fd=dirfd).st_mode):
                        scan.symlinks_refused += 1
                        continue
                    kept_dirs.append(name)
                dirnames[:] = kept_dirs
                for name in sorted(filenames):
                    media_type = MEDIA_TYPES.get(os.path.splitext(name)[1].lower())
                    if name.startswith(".") or media_type is None:
                        continue
                    seen += 1
                    if seen > MAX_FILES:
                        scan.files_omitted += 1
                        continue
                    # ``dirpath`` is "./guide": relative to the root by construction.
                    relpath = str(PurePosixPath(dirpath, name))
                    self._read_one(scan, dirfd, name, relpath, media_type)
        with self._cache_lock:
            # Keep only what this walk saw: changed or deleted files drop out of the cache.
            self._cache = {key: doc for key, doc in self._cache.items() if key in scan.keys}
        return scan

    def _read_one(self, scan: _Scan, dirfd: int, name: str, relpath: str, media_type: str) -> None:
        try:
            info = os.lstat(name, dir_fd=dirfd)
        except OSError:
            scan.unreadable += 1
            return
        if stat.S_ISLNK(info.st_mode):
            scan.symlinks_refused += 1
            return
        if not stat.S_ISREG(info.st_mode):
            scan.non_regular_skipped += 1
            return
        try:
            fd = os.open(name, _OPEN_FLAGS, dir_fd=dirfd)
        except OSError:
            # ELOOP: the name became a symlink after the lstat; anything else: unreadable.
            scan.unreadable += 1
            return
        try:
            opened = os.fstat(fd)
            if not stat.S_ISREG(opened.st_mode) or (opened.st_dev, opened.st_ino) != (
                info.st_dev,
                info.st_ino,
            ):
                scan.non_regular_skipped += 1
                return
            if opened.st_size > self.runtime.network.max_page_bytes:
                scan.too_large += 1
                return
            key = (relpath, opened.st_mtime_ns, opened.st_size)
            scan.keys.add(key)
            with self._cache_lock:
                cached = self._cache.get(key)
            if cached is not None:
                scan.docs.append(cached)
                return
            body = _read_bounded(fd, self.runtime.network.max_page_bytes)
        except OSError:
            scan.unreadable += 1
            return
        finally:
            os.close(fd)
        if body is None:
            scan.too_large += 1
            return
        doc = self._prepare(relpath, name, body, media_type)
        if doc is None:
            scan.not_extracted += 1
            return
        with self._cache_lock:
            self._cache[key] = doc
        scan.docs.append(doc)

    def _prepare(self, relpath: str, name: str, body: bytes, media_type: str) -> _Doc | None:
        decoded = decode_body(body, None, content_type=media_type)
        if media_type == "text/html":
            try:
                page = extract_page(
                    decoded.text, _docs_url(self.adapter_id, relpath), content_type=media_type
                )
            except ExtractionFailed:
                return None
            text, title = page.text, page.title or ""
        else:
            text = normalize_text(decoded.text)
            title = _markdown_title(decoded.text) if media_type == "text/markdown" else ""
        return _Doc(
            relpath=relpath,
            title=title or name,
            text=text,
            raw_digest=sha256_digest(body),
            chunks=chunk_text(text),
        )


def _read_bounded(fd: int, limit: int) -> bytes | None:
    """The file's bytes, or None when it holds more than ``limit`` (it grew after fstat)."""
    parts: list[bytes] = []
    total = 0
    while True:
        block = os.read(fd, min(65536, limit + 1 - total))
        if not block:
            return b"".join(parts)
        parts.append(block)
        total += len(block)
        if total > limit:
            return None
