"""PDF bytes → the text of each page, read with PDFium (``pypdfium2``) in a reader process.

PDFium is the PDF engine of Chromium: it reads what browsers read (broken cross-reference
tables, compressed object streams, CID fonts with ``ToUnicode`` maps, so CJK text comes out
as written), ten times faster than a pure-Python parser on the same files, and it bounds the
depth of nested objects and page trees itself. But a PDF is a program for a decompressor:
a 1 MB deflate bomb decodes to gigabytes, and pages sharing one huge stream make PDFium
decode it once per page. So PDFium never runs in the process that asked: every document is
read by a reader process (``_pdf_reader.py``) that bounds itself before it reads anything:

- decoded bytes: every Flate stream is inflated once, in bounded steps, before PDFium sees
  the file; one over ``PdfLimits.stream_bytes`` decoded, or a document over
  ``document_bytes`` in all, is ``content_too_large`` after at most that much work;
- memory: its address space is capped (``RLIMIT_AS``, ``memory_bytes``); a document that
  needs more is ``content_too_large`` and the reader is replaced;
- CPU: each document may use ``cpu_s`` seconds of CPU (``RLIMIT_CPU``), then the kernel
  ends the reader: ``cpu_deadline``; the parent also stops waiting after a wall-clock
  backstop and kills it;
- pages: at most ``max_pages`` are read (a file that claims a million pages costs no more
  than one of ``max_pages``), and reading stops once the text read reaches ``max_chars``
  characters. The body's own size is bounded before it gets here (``max_page_bytes``).

One reader per process (the service's own, or an analysis worker's), started on the first
PDF and kept for the next; documents are read one at a time, as PDFium is not thread-safe.
``close_readers()`` kills it at once (a thread waiting on it gets ``worker_lost``); the
analysis pool's ``close()`` calls it, and a reader whose parent is gone ends once its pipe
closes.

Each page's text is ``normalize_text``-ed on its own, so a page's text never runs into the
next one's. A file that needs a password is ``ExtractionFailed`` ``encrypted``; one whose
pages hold no text at all (a scan: pictures of text) ``no_text_layer``; one PDFium cannot
open ``parser_error``. A file encrypted only against editing (no password to open it) is
read, as any PDF viewer shows it.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import signal
import struct
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Final

from ..errors import ExtractionFailed
from ._extract import normalize_text

__all__ = [
    "PDF_TYPE",
    "PdfLimits",
    "PdfText",
    "close_readers",
    "extract_pdf",
    "is_pdf",
    "reader_stats",
]

#: The media type of a PDF response.
PDF_TYPE: Final = "application/pdf"
_MIB: Final = 1024 * 1024
_READER: Final = str(Path(__file__).with_name("_pdf_reader.py"))
#: Reasons a reader can give besides PDFium's own.
_TOO_LARGE: Final = "content_too_large"
_CPU_DEADLINE: Final = "cpu_deadline"
_LOST: Final = "worker_lost"
#: How long a new reader may take to import PDFium and say it is ready.
_START_S: Final = 30.0


@dataclass(frozen=True)
class PdfLimits:
    """What one document may cost its reader (module docstring). The defaults: 64 MiB
    decoded per stream and 256 MiB per document (a text PDF's fonts and pages decode to a
    few MB; a page's scanned picture, Flate-compressed, to some 30 MB), an address space of
    448 MiB (a reader holds about 27 MiB of it before the first document), 5 s of CPU (the
    tests' 53-page CJK document takes 0.1 s)."""

    stream_bytes: int = 64 * _MIB
    document_bytes: int = 256 * _MIB
    memory_bytes: int = 448 * _MIB
    cpu_s: float = 5.0

    @property
    def wall_s(self) -> float:
        """How long the parent waits for one document before it kills the reader: CPU time
        runs slower than the clock on a busy machine, so well past ``cpu_s``."""
        return 4 * self.cpu_s + 5.0


@dataclass(frozen=True)
class PdfText:
    """The pages read: ``pages[i]`` is the normalized text of page ``i + 1`` ("" when the
    page holds none); ``page_count`` is how many pages the document has (maybe more than
    were read); ``title`` is the document's own title ("" when none)."""

    pages: tuple[str, ...]
    page_count: int
    title: str


def is_pdf(content_type: str) -> bool:
    """True when ``content_type`` (a media type, maybe with parameters) is a PDF's."""
    return content_type.split(";", 1)[0].strip().lower() == PDF_TYPE


def extract_pdf(
    body: bytes,
    url: str,
    *,
    max_pages: int,
    max_chars: int,
    limits: PdfLimits | None = None,
) -> PdfText:
    """The text of the first ``max_pages`` pages of the PDF ``body``, read in this
    process's reader (module docstring). Raises ``ExtractionFailed`` (``encrypted``,
    ``no_text_layer``, ``parser_error``, ``content_too_large``, ``cpu_deadline``,
    ``worker_lost``)."""
    limits = limits or PdfLimits()
    header = {
        "max_pages": max_pages,
        # Raw text, before normalizing shrinks it; cut exactly here afterwards.
        "max_chars": 4 * max_chars,
        "stream_bytes": limits.stream_bytes,
        "document_bytes": limits.document_bytes,
        "cpu_s": limits.cpu_s,
    }
    reply = _readers.read(body, header, limits)
    failed = reply.get("failed")
    if failed is not None:
        raise ExtractionFailed(url, reason=str(failed))
    pages = _cut(tuple(normalize_text(str(text)) for text in reply["pages"]), max_chars)
    if not any(pages):
        raise ExtractionFailed(url, reason="no_text_layer")
    title = normalize_text(str(reply.get("title") or ""))
    return PdfText(pages=pages, page_count=int(reply["page_count"]), title=" ".join(title.split()))


def _cut(pages: tuple[str, ...], max_chars: int) -> tuple[str, ...]:
    """``pages`` with at most ``max_chars`` characters in all (the page that crosses it is
    cut there, the ones after it dropped)."""
    kept: list[str] = []
    total = 0
    for text in pages:
        kept.append(text[: max_chars - total])
        total += len(kept[-1])
        if total >= max_chars:
            break
    return tuple(kept)


def close_readers() -> None:
    """Kill this process's reader now, if it has one (a document being read fails as
    ``worker_lost``); the next PDF starts a new one."""
    _readers.close()


def reader_stats() -> dict[str, int]:
    """This process's readers so far: ``started``, ``killed`` (over a limit, stuck, or
    closed) and ``pid`` of the one alive now (0: none)."""
    return _readers.stats()


class _Reader:
    """One reader process and its pipes."""

    def __init__(self, limits: PdfLimits) -> None:
        self.memory_bytes = limits.memory_bytes
        self.closed = False  # killed by ``close_readers``
        self.timed_out = False  # still reading past the wall-clock backstop
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-E",
                "-s",
                _READER,
                json.dumps([entry for entry in sys.path if entry]),
                str(limits.memory_bytes),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            close_fds=True,
        )
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.stdin: IO[bytes] = self.process.stdin
        self.stdout: IO[bytes] = self.process.stdout
        if _receive(self.stdout, time.monotonic() + _START_S) is None:
            self.kill()
            raise ExtractionFailed("", reason=_LOST)

    def read(self, body: bytes, header: dict[str, Any], wall_s: float) -> dict[str, Any] | None:
        """The reader's reply, or None when it died or ran past ``wall_s``."""
        try:
            for part in (json.dumps(header).encode(), body):
                self.stdin.write(struct.pack(">I", len(part)) + part)
            self.stdin.flush()
        except (OSError, ValueError):
            return None
        deadline = time.monotonic() + wall_s
        data = _receive(self.stdout, deadline)
        if data is None:
            self.timed_out = time.monotonic() >= deadline
            return None
        found: dict[str, Any] = json.loads(data)
        return found

    def exit_reason(self) -> str:
        """Why the reader ended under a document: killed by ``close_readers`` (``worker_lost``),
        its CPU allowance (``SIGXCPU``: ``cpu_deadline``), or another signal (a failed
        allocation in PDFium's C code, with the address space capped: ``content_too_large``).
        """
        try:
            code = self.process.wait(2.0)
        except subprocess.TimeoutExpired:
            return _LOST
        if self.closed or code >= 0:
            return _LOST
        return _CPU_DEADLINE if code == -signal.SIGXCPU else _TOO_LARGE

    def kill(self) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(OSError):
                self.process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(5.0)
        for pipe in (self.stdin, self.stdout):
            with contextlib.suppress(OSError, ValueError):
                pipe.close()


def _receive(source: IO[bytes], deadline: float) -> bytes | None:
    """One length-prefixed message from ``source`` by ``deadline`` (monotonic), or None (the
    reader ended, or the time is up)."""
    buffered = b""
    fd = source.fileno()
    need = 4
    size: int | None = None
    while True:
        while len(buffered) < need:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            try:
                ready, _, _ = select.select([fd], [], [], left)
            except (OSError, ValueError):
                return None
            if not ready:
                return None
            try:
                chunk = os.read(fd, max(need - len(buffered), 65536))
            except OSError:
                return None
            if not chunk:
                return None
            buffered += chunk
        if size is None:
            (size,) = struct.unpack(">I", buffered[:4])
            buffered = buffered[4:]
            need = size
            continue
        return buffered[:size]


class _Readers:
    """This process's reader: started on first use, replaced after it ends, one document at
    a time. Forgets (never kills) a reader inherited through ``fork``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # one document at a time
        self._guard = threading.Lock()  # the current reader, swapped or killed
        self._reader: _Reader | None = None
        self._pid = os.getpid()
        self.started = 0
        self.killed = 0

    def _current(self, limits: PdfLimits) -> _Reader:
        with self._guard:
            if self._pid != os.getpid():
                self._pid, self._reader = os.getpid(), None  # the parent's, not ours
            reader = self._reader
            if reader is not None and (
                reader.process.poll() is not None or reader.memory_bytes != limits.memory_bytes
            ):
                self._drop(reader)
                reader = None
            if reader is None:
                reader = self._reader = _Reader(limits)
                self.started += 1
            return reader

    def _drop(self, reader: _Reader) -> None:
        """Kill ``reader`` and forget it (under ``_guard``)."""
        if reader.process.poll() is None:
            self.killed += 1
        reader.kill()
        if self._reader is reader:
            self._reader = None

    def read(self, body: bytes, header: dict[str, Any], limits: PdfLimits) -> dict[str, Any]:
        with self._lock:
            try:
                reader = self._current(limits)
            except (OSError, ExtractionFailed):  # no reader could start: nothing read it
                return {"failed": _LOST}
            reply = reader.read(body, header, limits.wall_s)
            if reply is None:
                stuck = reader.timed_out and reader.process.poll() is None
                # Ended under the document (its pipe closed): how, before anything kills it.
                reason = _CPU_DEADLINE if stuck else reader.exit_reason()
                with self._guard:
                    if not stuck and not reader.closed:
                        self.killed += 1  # ended by the kernel under this document
                    self._drop(reader)
                return {"failed": reason}
            if reply.get("failed") == _TOO_LARGE:
                # Its address space may be spent or fragmented: the next document gets a
                # fresh reader.
                with self._guard:
                    self._drop(reader)
            return reply

    def close(self) -> None:
        with self._guard:
            if self._pid != os.getpid():
                self._pid, self._reader = os.getpid(), None
                return
            if self._reader is not None:
                self._reader.closed = True
                self._drop(self._reader)

    def stats(self) -> dict[str, int]:
        with self._guard:
            alive = self._reader is not None and self._reader.process.poll() is None
            pid = self._reader.process.pid if alive and self._reader is not None else 0
            return {"started": self.started, "killed": self.killed, "pid": pid}


_readers = _Readers()
# A reader dies with its parent anyway; closing it here keeps the exit quiet and prompt.
atexit.register(close_readers)
