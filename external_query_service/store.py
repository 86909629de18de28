"""In-process evidence captures: the normalized text of every page the gateway reads.

A reference is ``ev:<sha256 hex of the text>``, so the same text stored twice is one
capture. Snippets point back into it as ``(ref, offset, length)``. Reads are bounded
(``MAX_READ_CHARS``); ``window`` pages through a text, ``passage_options`` lists its
passages (the chain's own chunks) with ids a caller can name again.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field

from .digests import sha256_digest
from .text.chunk import chunk_text

__all__ = [
    "MAX_READ_CHARS",
    "PASSAGE_CHARS",
    "Capture",
    "EvidenceStore",
    "Passage",
    "ReadWindow",
    "sha256_digest",
]

#: Upper bound for one bounded read.
MAX_READ_CHARS = 1200
#: Longest passage ``passage_options`` offers (the gateway's chunk size).
PASSAGE_CHARS = 360
#: Characters of a passage shown as its preview.
_PREVIEW_CHARS = 80


class Capture(BaseModel):
    """What the store holds about one capture, without its text: reference, source, length,
    digest, a short summary and metadata."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ref: str
    source: str
    length: int
    digest: str
    summary: str
    metadata: dict[str, str] = Field(default_factory=dict)


class Passage(BaseModel):
    """One passage candidate of a capture: ``text[offset:offset + length]`` of ``ref``.

    ``passage_id`` is ``<ref>#p<index>``; the same text always yields the same passages.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    passage_id: str
    ref: str
    index: int
    offset: int
    length: int
    preview: str


class ReadWindow(BaseModel):
    """One bounded read: ``text`` is ``length`` characters from ``offset`` of ``total``;
    ``next_offset`` is where the next window starts (None at the end of the text)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ref: str
    offset: int
    length: int
    total: int
    text: str
    next_offset: int | None


class EvidenceStore:
    """Thread-safe, append-only captures keyed by content."""

    def __init__(self) -> None:
        self._texts: dict[str, str] = {}
        self._captures: dict[str, Capture] = {}
        self._passages: dict[str, tuple[Passage, ...]] = {}
        self._lock = threading.Lock()

    def put(self, text: str, source: str, metadata: Mapping[str, str] | None = None) -> str:
        """Store ``text`` read from ``source`` and return its ``ev:`` reference (the same text
        twice is one capture)."""
        digest = sha256_digest(text)
        ref = "ev:" + digest.removeprefix("sha256:")
        with self._lock:
            if ref not in self._captures:
                self._texts[ref] = text
                self._captures[ref] = Capture(
                    ref=ref,
                    source=source,
                    length=len(text),
                    digest=digest,
                    summary=" ".join(text[:160].split()),
                    metadata=dict(metadata or {}),
                )
        return ref

    def describe(self, ref: str) -> Capture:
        """The capture behind ``ref``; ``KeyError`` naming it when unknown."""
        try:
            return self._captures[ref]
        except KeyError:
            raise KeyError(f"unknown evidence reference: {ref}") from None

    def references(self) -> tuple[Capture, ...]:
        """Every capture, in the order stored."""
        with self._lock:
            return tuple(self._captures.values())

    def read(self, ref: str, offset: int = 0, limit: int = MAX_READ_CHARS) -> str:
        """At most ``MAX_READ_CHARS`` characters of the original text from ``offset``."""
        if offset < 0 or limit < 0:
            raise ValueError("offset and limit must not be negative")
        text = self._text(ref)
        return text[offset : offset + min(limit, MAX_READ_CHARS)]

    def window(self, ref: str, offset: int = 0, limit: int = MAX_READ_CHARS) -> ReadWindow:
        """``read`` with its position: reading from each ``next_offset`` covers the text."""
        text = self.read(ref, offset, limit)
        total = len(self._text(ref))
        end = offset + len(text)
        return ReadWindow(
            ref=ref,
            offset=offset,
            length=len(text),
            total=total,
            text=text,
            next_offset=end if text and end < total else None,
        )

    def passage_options(self, ref: str) -> tuple[Passage, ...]:
        """The capture's passages in text order (paragraph- and CJK-aware chunks of at most
        ``PASSAGE_CHARS`` characters; every one an exact slice of the stored text)."""
        with self._lock:
            cached = self._passages.get(ref)
        if cached is not None:
            return cached
        text = self._text(ref)
        passages = tuple(
            Passage(
                passage_id=f"{ref}#p{index}",
                ref=ref,
                index=index,
                offset=chunk.offset,
                length=chunk.length,
                preview=" ".join(chunk.text[:_PREVIEW_CHARS].split()),
            )
            for index, chunk in enumerate(chunk_text(text, max_chars=PASSAGE_CHARS))
        )
        with self._lock:
            self._passages[ref] = passages
        return passages

    def passage(self, passage_id: str) -> Passage:
        """The passage ``passage_id`` names; ``KeyError`` when there is no such passage."""
        ref, sep, index = passage_id.rpartition("#p")
        if sep and index.isdigit() and ref in self._captures:
            options = self.passage_options(ref)
            if int(index) < len(options):
                return options[int(index)]
        raise KeyError(f"unknown passage: {passage_id}")

    def quote(self, ref: str, offset: int, length: int) -> str:
        """The exact span a snippet points at (for checking a quote; not length-bounded)."""
        return self._text(ref)[offset : offset + length]

    def _text(self, ref: str) -> str:
        try:
            return self._texts[ref]
        except KeyError:
            raise KeyError(f"unknown evidence reference: {ref}") from None

    def __len__(self) -> int:
        return len(self._captures)
