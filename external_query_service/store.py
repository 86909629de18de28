"""In-process evidence captures: the normalised text of every page the gateway reads.

A reference is ``ev:<sha256 hex of the text>``, so the same text stored twice is one
capture. Snippets point back into it as ``(ref, offset, length)``.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["MAX_READ_CHARS", "Capture", "EvidenceStore", "sha256_digest"]

#: Upper bound for one bounded read.
MAX_READ_CHARS = 1200


def sha256_digest(data: bytes | str) -> str:
    if isinstance(data, str):
        data = data.encode("utf-8")
    return "sha256:" + hashlib.sha256(data).hexdigest()


class Capture(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    ref: str
    source: str
    length: int
    digest: str
    summary: str
    metadata: dict[str, str] = Field(default_factory=dict)


class EvidenceStore:
    """Thread-safe, append-only captures keyed by content."""

    def __init__(self) -> None:
        self._texts: dict[str, str] = {}
        self._captures: dict[str, Capture] = {}
        self._lock = threading.Lock()

    def put(self, text: str, source: str, metadata: Mapping[str, str] | None = None) -> str:
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
        try:
            return self._captures[ref]
        except KeyError:
            raise KeyError(f"unknown evidence reference: {ref}") from None

    def references(self) -> tuple[Capture, ...]:
        with self._lock:
            return tuple(self._captures.values())

    def read(self, ref: str, offset: int = 0, limit: int = MAX_READ_CHARS) -> str:
        """At most ``MAX_READ_CHARS`` characters of the original text from ``offset``."""
        if offset < 0 or limit < 0:
            raise ValueError("offset and limit must not be negative")
        text = self._text(ref)
        return text[offset : offset + min(limit, MAX_READ_CHARS)]

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
