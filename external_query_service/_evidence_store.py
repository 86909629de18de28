"""In-process evidence captures: the normalized text of the pages the gateway reads.

A reference is ``ev:<sha256 hex of the text>``, so the same text stored twice is one
capture. Snippets point back into it as ``(ref, offset, length)``. Reads are bounded
(``MAX_READ_CHARS``); ``window`` pages through a text, ``passage_options`` lists its
passages (the chain's own chunks) with ids a caller can name again.

The store is bounded by bytes (``max_bytes``; ``[cache] store_max_bytes`` for a service):
past the bound the least recently used captures are evicted. Never evicted: a capture
pinned by a question still being answered (``question()``). Evicted last: a capture for
``hold_s`` seconds after that question's answer is returned (``[cache] store_hold_s``), so
a caller can read every passage an answer cites back during that window, as long as the
bound has room for every capture so held (the bound wins: a busy service answering many
questions a second would otherwise hold every page of the last ``hold_s`` seconds, far past
its bound). Later, a cited capture stays readable until the bound needs its room; reading
an evicted one raises ``EvidenceEvicted`` (a ``KeyError``) saying so.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field

from pydantic import Field

from ._digests import sha256_digest
from ._frozen import Frozen
from ._memo import SizedLRU
from .errors import EvidenceEvicted
from .text._chunk import chunk_text

__all__ = [
    "CAPTURE_OVERHEAD",
    "DEFAULT_HOLD_S",
    "DEFAULT_STORE_BYTES",
    "MAX_READ_CHARS",
    "PASSAGE_CHARS",
    "Capture",
    "EvidenceEvicted",
    "EvidenceStore",
    "Passage",
    "ReadWindow",
    "ref_digest",
    "sha256_digest",
]

#: The default bound of a store, in bytes of text held (the settings' default too).
DEFAULT_STORE_BYTES = 32 * 1024 * 1024
#: How long a returned answer's captures are kept at least, by default (seconds).
DEFAULT_HOLD_S = 600.0
#: Bytes counted per capture besides its text (the capture record, its passages' index).
CAPTURE_OVERHEAD = 1024
#: How many evicted references are remembered, so reading one says "evicted".
_REMEMBERED_EVICTIONS = 4096

#: Upper bound for one bounded read.
MAX_READ_CHARS = 1200
#: Longest passage ``passage_options`` offers (the gateway's chunk size).
PASSAGE_CHARS = 360
#: Characters of a passage shown as its preview.
_PREVIEW_CHARS = 80


def ref_digest(ref: str) -> str:
    """The ``sha256:<hex>`` digest of the text a reference names: ``put`` spells the
    reference from that digest (``ev:<the same hex>``), so a caller that needs both has the
    digest without hashing the text again."""
    return "sha256:" + ref.removeprefix("ev:")


class Capture(Frozen):
    """What the store holds about one capture, without its text: reference, source, length,
    digest, a short summary and metadata."""

    ref: str
    source: str
    length: int
    digest: str
    summary: str
    metadata: dict[str, str] = Field(default_factory=dict)


class Passage(Frozen):
    """One passage candidate of a capture: ``text[offset:offset + length]`` of ``ref``.

    ``passage_id`` is ``<ref>#p<index>``; the same text always yields the same passages.
    """

    passage_id: str
    ref: str
    index: int
    offset: int
    length: int
    preview: str


class ReadWindow(Frozen):
    """One bounded read: ``text`` is ``length`` characters from ``offset`` of ``total``;
    ``next_offset`` is where the next window starts (None at the end of the text)."""

    ref: str
    offset: int
    length: int
    total: int
    text: str
    next_offset: int | None


@dataclass(eq=False)
class _Question:
    """The captures one question in progress has stored (pinned until it ends)."""

    store: EvidenceStore
    refs: set[str] = field(default_factory=set)


#: The questions in progress in this context (a question's tasks and threads inherit it).
_questions: ContextVar[tuple[_Question, ...]] = ContextVar("evidence_questions", default=())


class EvidenceStore:
    """Thread-safe captures keyed by content, at most ``max_bytes`` of them (see the module
    docstring for what is evicted when). ``clock`` (seconds, monotonic) times the hold."""

    def __init__(
        self,
        max_bytes: int = DEFAULT_STORE_BYTES,
        *,
        hold_s: float = DEFAULT_HOLD_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._hold_s = hold_s
        self._clock = clock
        self._pins: dict[str, int] = {}
        # ref -> until when (clock) it is kept, in that order (each hold ends after the ones
        # before it: the clock is monotonic, the hold the same length); only refs stored.
        self._held: dict[str, float] = {}
        self._evicted: OrderedDict[str, None] = OrderedDict()
        self._texts: SizedLRU[str, str] = SizedLRU(
            max_bytes,
            lambda text: sys.getsizeof(text) + CAPTURE_OVERHEAD,
            keep=self._kept,
            on_evict=self._forget,
        )
        self._captures: dict[str, Capture] = {}
        self._passages: dict[str, tuple[Passage, ...]] = {}
        self._lock = threading.RLock()

    @property
    def max_bytes(self) -> int:
        """The byte bound past which least recently used captures are evicted."""
        return self._texts.max_size

    @property
    def size(self) -> int:
        """Bytes held: the texts (as Python holds them) plus a fixed overhead per capture."""
        return self._texts.total

    def put(self, text: str, source: str, metadata: Mapping[str, str] | None = None) -> str:
        """Store ``text`` read from ``source`` and return its ``ev:`` reference (the same text
        twice is one capture)."""
        digest = sha256_digest(text)
        ref = "ev:" + digest.removeprefix("sha256:")
        with self._lock:
            for question in _questions.get():
                if question.store is self and ref not in question.refs:
                    question.refs.add(ref)
                    self._pins[ref] = self._pins.get(ref, 0) + 1
            if self._texts.get(ref) is None:
                self._evicted.pop(ref, None)
                self._captures[ref] = Capture(
                    ref=ref,
                    source=source,
                    length=len(text),
                    digest=digest,
                    summary=" ".join(text[:160].split()),
                    metadata=dict(metadata or {}),
                )
                if not self._texts.put(ref, text, trim=False):  # larger than the whole bound
                    self._captures.pop(ref, None)
                    self._remember_eviction(ref)
                self._bound()
        return ref

    def _bound(self) -> None:
        """Back under the bound: least recently used captures neither pinned nor held go
        first; with only held and pinned captures left, the held ones go too, least
        recently used first (pinned ones never)."""
        texts = self._texts
        if texts.total <= texts.max_size:
            return
        self._expire(self._clock())
        if self._kept_count() < len(texts):  # else a walk past every capture finds none
            texts.trim(keep=self._kept)
        if texts.total > texts.max_size:
            texts.trim(keep=self._pins.__contains__)

    def _expire(self, now: float) -> None:
        """Forget the holds that ended by ``now`` (the oldest first: ``_held``'s order)."""
        held = self._held
        while held:
            ref, until = next(iter(held.items()))
            if until > now:
                break
            del held[ref]

    def _kept_count(self) -> int:
        """How many stored captures are pinned or held (holds ended already expired)."""
        texts, held = self._texts, self._held
        return len(held) + sum(1 for ref in self._pins if ref not in held and ref in texts)

    @contextlib.contextmanager
    def question(self) -> Iterator[None]:
        """Pin every capture stored during the block (by this task, the tasks it starts and
        their threads) until it ends, then hold them for ``hold_s`` seconds more."""
        question = _Question(self)
        token = _questions.set((*_questions.get(), question))
        try:
            yield
        finally:
            _questions.reset(token)
            self._release(question.refs)

    def _release(self, refs: set[str]) -> None:
        with self._lock:
            now = self._clock()
            until = now + self._hold_s
            for ref in refs:
                count = self._pins.get(ref, 0) - 1
                if count > 0:
                    self._pins[ref] = count
                else:
                    self._pins.pop(ref, None)
                if self._hold_s > 0 and ref in self._texts:
                    # At the end: no hold ends later (the clock is monotonic).
                    self._held.pop(ref, None)
                    self._held[ref] = until
            self._expire(now)
            self._bound()

    def _kept(self, ref: str) -> bool:
        return ref in self._pins or self._held.get(ref, 0.0) > self._clock()

    def _forget(self, ref: str, _text: str) -> None:
        self._captures.pop(ref, None)
        self._passages.pop(ref, None)
        self._held.pop(ref, None)
        self._remember_eviction(ref)

    def _remember_eviction(self, ref: str) -> None:
        self._evicted[ref] = None
        while len(self._evicted) > _REMEMBERED_EVICTIONS:
            self._evicted.popitem(last=False)

    def _missing(self, ref: str) -> KeyError:
        if ref in self._evicted:
            return EvidenceEvicted(
                f"evidence reference {ref} was evicted: the store keeps at most "
                f"{self.max_bytes} bytes, and a returned answer's captures at least "
                f"{self._hold_s:g} s while they fit in that bound"
            )
        return KeyError(f"unknown evidence reference: {ref}")

    def describe(self, ref: str) -> Capture:
        """The capture behind ``ref``; ``KeyError`` naming it when unknown, ``EvidenceEvicted`` when
        evicted."""
        with self._lock:
            capture = self._captures.get(ref)
            if capture is None:
                raise self._missing(ref)
            self._texts.get(ref)  # counts as use
            return capture

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

    def chunk_options(self, ref: str) -> tuple[Passage, ...]:
        """The capture's passages in text order (paragraph- and CJK-aware chunks of at most
        ``PASSAGE_CHARS`` characters; every one an exact slice of the stored text).
        ``passage_options`` is the older name of the same method."""
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
            if ref in self._captures:  # not evicted meanwhile
                self._passages[ref] = passages
        return passages

    #: The older name of ``chunk_options``, kept for one release.
    passage_options = chunk_options

    def passage(self, passage_id: str) -> Passage:
        """The passage ``passage_id`` names; ``KeyError`` when there is no such passage."""
        ref, sep, index = passage_id.rpartition("#p")
        if sep and index.isdigit() and ref in self._evicted:
            raise self._missing(ref)
        if sep and index.isdigit() and ref in self._captures:
            options = self.passage_options(ref)
            if int(index) < len(options):
                return options[int(index)]
        raise KeyError(f"unknown passage: {passage_id}")

    def quote(self, ref: str, offset: int, length: int) -> str:
        """The exact span a snippet points at (for checking a quote; not length-bounded)."""
        return self._text(ref)[offset : offset + length]

    def _text(self, ref: str) -> str:
        with self._lock:
            text = self._texts.get(ref)
            if text is None:
                raise self._missing(ref)
            return text

    def __len__(self) -> int:
        return len(self._captures)
