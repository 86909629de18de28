"""The PDF reader process: PDFium runs here, never in the service's own process.

Started by ``_pdf.py`` as a script (``python _pdf_reader.py SYS_PATH MEMORY``), so it
imports nothing of the package (a reader is up in the time ``pypdfium2`` takes to import).
Before it reads anything it bounds itself:

- its address space (``RLIMIT_AS``, ``MEMORY`` bytes): an allocation past it fails
  (``MemoryError``, or PDFium aborts), and the document is ``content_too_large``;
- core dumps off (``RLIMIT_CORE`` 0); it ends when its parent's end of the pipe closes
  (the parent exited or was killed), at the latest once the document it reads is done or
  past its CPU allowance (a parent-death signal would fire when the *thread* that started
  it ends, and threads that read PDFs come and go);
- per document, its CPU time (``RLIMIT_CPU``, soft limit at the CPU used so far plus the
  document's allowance): past it the kernel ends the process with ``SIGXCPU``, which the
  parent reports as ``cpu_deadline``.

Then, per document, before PDFium sees it, every Flate-compressed stream is inflated once
in bounded steps (nothing kept) and its decoded bytes counted, through nested Flate layers
too: a stream over ``stream_bytes`` or a document over ``document_bytes`` decoded is
``content_too_large`` after at most that much work, whatever the ratio of the bomb.

Messages on stdin and stdout are length-prefixed (4 bytes, big-endian): a JSON header with
the limits, then the body; the reply is one JSON object, ``{"pages": [...], "page_count":
n, "title": "..."}`` or ``{"failed": reason}``.
"""

from __future__ import annotations

import json
import os
import resource
import struct
import sys
import zlib
from collections.abc import Iterator
from typing import IO, Any

__all__ = ["decoded_within", "main"]

# PDFium's "a password is required" (FPDF_ERR_PASSWORD).
_PASSWORD_ERROR = 4
#: Compressed input fed to the inflater at once, and decoded output taken from it at once:
#: what the scan holds in memory, whatever the stream's ratio.
_STEP = 64 * 1024
_OUTPUT_STEP = 1024 * 1024
#: Flate layers followed inside one stream (a Flate stream of a Flate stream of ...).
_MAX_LAYERS = 4


def _send(out: IO[bytes], data: bytes) -> None:
    out.write(struct.pack(">I", len(data)) + data)
    out.flush()


def _recv(source: IO[bytes]) -> bytes | None:
    head = source.read(4)
    if len(head) < 4:
        return None
    (size,) = struct.unpack(">I", head)
    data = source.read(size)
    return data if len(data) == size else None


def _cpu_allowance(seconds: float) -> None:
    """The soft CPU limit: what this process has used so far, plus ``seconds``."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    soft = int(usage.ru_utime + usage.ru_stime + seconds) + 1
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


def _looks_zlib(data: bytes) -> bool:
    return len(data) >= 2 and data[0] & 0x0F == 8 and ((data[0] << 8) | data[1]) % 31 == 0


def _inflate(inflater: Any, data: bytes) -> Iterator[bytes]:
    """What ``inflater`` makes of ``data``, in pieces of at most ``_OUTPUT_STEP`` bytes."""
    while data and not inflater.eof:
        piece = inflater.decompress(data, _OUTPUT_STEP)
        data = inflater.unconsumed_tail
        if piece:
            yield piece
        elif not data:
            break


def _stream_bytes(body: bytes, start: int, cap: int) -> int | None:
    """Decoded bytes of the Flate stream starting at ``start`` (counted over every nested
    Flate layer), or None as soon as they pass ``cap``. A stream that is not Flate, or
    breaks off, counts what it decoded so far."""
    if not _looks_zlib(body[start : start + 2]):
        return 0
    layers = [zlib.decompressobj()]
    begun = [False]  # whether each layer has given output yet (its first piece decides)
    produced = 0

    def feed(level: int, data: bytes) -> bool:
        nonlocal produced
        for piece in _inflate(layers[level], data):
            produced += len(piece)
            if produced > cap:
                return False
            last = level + 1 == len(layers)
            if last and not begun[level] and len(layers) < _MAX_LAYERS and _looks_zlib(piece):
                layers.append(zlib.decompressobj())
                begun.append(False)
            begun[level] = True
            if level + 1 < len(layers) and not feed(level + 1, piece):
                return False
        return True

    position = start
    try:
        while position < len(body) and not layers[0].eof:
            if not feed(0, body[position : position + _STEP]):
                return None
            position += _STEP
    except zlib.error:
        pass  # a broken stream: PDFium decides what it makes of it
    return produced


def decoded_within(body: bytes, stream_bytes: int, document_bytes: int) -> bool:
    """Whether every Flate stream of ``body`` decodes to at most ``stream_bytes`` and all of
    them together to at most ``document_bytes`` (module docstring)."""
    total = 0
    position = 0
    while True:
        found = body.find(b"stream", position)
        if found < 0:
            return True
        start = found + 6
        position = start
        if body[found - 3 : found] == b"end":
            continue
        if body[start : start + 2] == b"\r\n":
            start += 2
        elif body[start : start + 1] in (b"\n", b"\r"):
            start += 1
        else:
            continue
        used = _stream_bytes(body, start, min(stream_bytes, document_bytes - total))
        if used is None:
            return False
        total += used


def _read(pdfium: Any, body: bytes, limits: dict[str, Any]) -> dict[str, Any]:
    if not decoded_within(body, int(limits["stream_bytes"]), int(limits["document_bytes"])):
        return {"failed": "content_too_large"}
    try:
        document = pdfium.PdfDocument(body)
    except pdfium.PdfiumError as exc:
        encrypted = getattr(exc, "err_code", None) == _PASSWORD_ERROR
        return {"failed": "encrypted" if encrypted else "parser_error"}
    try:
        page_count = len(document)
        texts: list[str] = []
        left = int(limits["max_chars"])
        for index in range(min(page_count, int(limits["max_pages"]))):
            page = document[index]
            try:
                textpage = page.get_textpage()
                try:
                    text = textpage.get_text_bounded()
                finally:
                    textpage.close()
            finally:
                page.close()
            texts.append(text[:left])
            left -= len(texts[-1])
            if left <= 0:
                break
        title = str(document.get_metadata_value("Title") or "")
    except pdfium.PdfiumError:
        return {"failed": "parser_error"}
    finally:
        document.close()
    return {"pages": texts, "page_count": page_count, "title": title}


def main() -> None:
    """The reader's life: bound itself, import PDFium, say ready, then read one document
    per request until its parent closes the pipe (module docstring)."""
    sys.path[:] = json.loads(sys.argv[1])
    memory = int(sys.argv[2])
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    import pypdfium2 as pdfium  # type: ignore[import-untyped]

    source, out = sys.stdin.buffer, sys.stdout.buffer
    _send(out, json.dumps({"ready": os.getpid()}).encode())
    while True:
        header = _recv(source)
        body = _recv(source) if header is not None else None
        if header is None or body is None:
            return
        limits = json.loads(header)
        _cpu_allowance(float(limits["cpu_s"]))
        try:
            reply = _read(pdfium, body, limits)
        except MemoryError:
            # The address space is spent: say so, then end (a fresh reader takes the next).
            del body
            _send(out, b'{"failed": "content_too_large"}')
            os._exit(0)
        _send(out, json.dumps(reply).encode())


if __name__ == "__main__":
    main()
