"""Root-bounded workspace tools: list, literal search and read of plain files.

All access goes through ``SafeRoot`` (``fsguard.py``): descriptor-relative no-follow
opens, symlinks and non-regular files refused, nothing outside the root, nothing imported
or executed — files are bytes to decode and quote. Every limit that cuts a result short
is reported as a named count, never silently.

A workspace capture keeps the file's decoded text with line endings unified to ``\\n``
(indentation and line numbers survive), so ``(ref, offset, length)`` quotes exact lines.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from .._digests import sha256_digest
from .._evidence_store import EvidenceStore
from .._frozen import Frozen
from ..errors import ToolkitError
from ..text._decode import decode_body
from ._fsguard import SafeRoot

__all__ = [
    "FileCapture",
    "FileInfo",
    "FileListing",
    "SearchMatch",
    "SearchResult",
    "WorkspaceLimits",
    "WorkspaceTools",
]

#: A file whose first bytes hold NUL is binary and is not read as text.
_BINARY_SNIFF = 8192
#: Longest line text a search match carries (the capture holds the whole line).
_LINE_CHARS = 300


@dataclass(frozen=True)
class WorkspaceLimits:
    """How many files, bytes per file, matches and searched bytes one ``WorkspaceTools``
    allows."""

    max_files: int = 2000
    max_file_bytes: int = 1_000_000
    max_matches: int = 100
    max_search_bytes: int = 20_000_000


class FileInfo(Frozen):
    """A listed file: path relative to the root, and size."""

    path: str
    size: int


class FileListing(Frozen):
    """Regular files below ``under``; ``omissions`` counts what was left out, by reason."""

    under: str
    files: tuple[FileInfo, ...]
    omissions: dict[str, int]


class SearchMatch(Frozen):
    """One occurrence: ``line`` and ``column`` are 1-based; ``(ref, offset, length)`` is the
    whole line in the stored text; ``text`` is that line, cut at 300 characters."""

    path: str
    line: int
    column: int
    ref: str
    offset: int
    length: int
    text: str


class SearchResult(Frozen):
    """A literal search's matches; ``omissions`` counts what was left out, by reason."""

    query: str
    under: str
    matches: tuple[SearchMatch, ...]
    files_searched: int
    files_matched: int
    omissions: dict[str, int]


class FileCapture(Frozen):
    """A file read into the store: ``digest`` of the stored text, ``raw_digest`` of the bytes."""

    path: str
    ref: str
    length: int
    digest: str
    raw_digest: str
    passages: int
    replaced_bytes: bool


def _as_text(body: bytes) -> tuple[str, bool]:
    decoded = decode_body(body, None, content_type="text/plain")
    return decoded.text.replace("\r\n", "\n").replace("\r", "\n"), decoded.replaced


def _lines(text: str, query: str) -> Iterator[tuple[int, int, int, int]]:
    """(line number, column, line start, line end) of every occurrence of ``query``."""
    start = text.find(query)
    while start >= 0:
        line_start = text.rfind("\n", 0, start) + 1
        line_end = text.find("\n", start)
        line_end = len(text) if line_end < 0 else line_end
        yield text.count("\n", 0, line_start) + 1, start - line_start + 1, line_start, line_end
        start = text.find(query, start + max(1, len(query)))


class WorkspaceTools:
    """List, search and read plain files under ``root`` (see the module docstring).

    Refusals (``symlink_refused``, ``path_escapes_root``, ``not_regular_file``) raise
    ``BoundaryRefused``; other failures ``ToolkitError`` with a reason; a platform without
    safe opens ``UnsafePlatform`` at construction.
    """

    def __init__(
        self, root: str | Path, store: EvidenceStore, *, limits: WorkspaceLimits | None = None
    ) -> None:
        self.root = SafeRoot(root)
        self._store = store
        self.limits = limits or WorkspaceLimits()
        self._captures: dict[str, FileCapture] = {}

    def captures(self) -> tuple[FileCapture, ...]:
        """Files read into the store, in reading order."""
        return tuple(self._captures.values())

    def capture(self, ref: str) -> FileCapture | None:
        """The file capture behind ``ref``, or None."""
        return next((item for item in self._captures.values() if item.ref == ref), None)

    def list(self, under: str = "") -> FileListing:
        """Regular files under ``under`` (the root by default), with what was left out."""
        walk = self.root.walk(under, max_files=self.limits.max_files)
        return FileListing(
            under=under,
            files=tuple(FileInfo(path=entry.relpath, size=entry.size) for entry in walk.files),
            omissions=walk.omissions(),
        )

    def read(self, path: str) -> FileCapture:
        """Read one file into the store (refused: links, non-regular files, escapes)."""
        body = self.root.read_bytes(path, self.limits.max_file_bytes)
        if b"\x00" in body[:_BINARY_SNIFF]:
            raise ToolkitError(f"{path} is binary, not text", reason="binary_file")
        return self._store_text(path, body)

    def search(self, query: str, under: str = "") -> SearchResult:
        """Literal, case-sensitive search for ``query`` in the files below ``under``.

        A file with a match is read into the store, so every match points into a capture.
        """
        if not query:
            raise ToolkitError("the search query is empty", reason="empty_query")
        walk = self.root.walk(under, max_files=self.limits.max_files)
        omissions = walk.omissions()

        def skip(reason: str) -> None:
            omissions[reason] = omissions.get(reason, 0) + 1

        matches: list[SearchMatch] = []
        searched = matched = read_bytes = 0
        for entry in walk.files:
            if entry.size > self.limits.max_file_bytes:
                skip("too_large")
                continue
            if read_bytes + entry.size > self.limits.max_search_bytes:
                skip("search_byte_budget")
                continue
            try:
                body = self.root.read_bytes(entry.relpath, self.limits.max_file_bytes)
            except ToolkitError as exc:
                skip(exc.reason)
                continue
            read_bytes += len(body)
            if b"\x00" in body[:_BINARY_SNIFF]:
                skip("binary_skipped")
                continue
            searched += 1
            text, _ = _as_text(body)
            hits = list(_lines(text, query))
            if not hits:
                continue
            matched += 1
            capture = self._store_text(entry.relpath, body)
            for line, column, start, end in hits:
                if len(matches) >= self.limits.max_matches:
                    skip("matches_omitted")
                    continue
                matches.append(
                    SearchMatch(
                        path=entry.relpath,
                        line=line,
                        column=column,
                        ref=capture.ref,
                        offset=start,
                        length=end - start,
                        text=text[start:end][:_LINE_CHARS],
                    )
                )
        return SearchResult(
            query=query,
            under=under,
            matches=tuple(matches),
            files_searched=searched,
            files_matched=matched,
            omissions=omissions,
        )

    def _store_text(self, path: str, body: bytes) -> FileCapture:
        text, replaced = _as_text(body)
        raw_digest = sha256_digest(body)
        ref = self._store.put(
            text,
            source=f"workspace:{path}",
            metadata={"kind": "workspace", "path": path, "raw_digest": raw_digest},
        )
        capture = FileCapture(
            path=path,
            ref=ref,
            length=len(text),
            digest=sha256_digest(text),
            raw_digest=raw_digest,
            passages=len(self._store.passage_options(ref)),
            replaced_bytes=replaced,
        )
        self._captures[path] = capture
        return capture
