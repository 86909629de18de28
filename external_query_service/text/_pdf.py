"""PDF bytes → the text of each page, read with PDFium (``pypdfium2``).

PDFium is the PDF engine of Chromium: it reads what browsers read (broken cross-reference
tables, compressed object streams, CID fonts with ``ToUnicode`` maps, so CJK text comes out
as written), ten times faster than a pure-Python parser on the same files, and it bounds the
depth of nested objects and page trees itself. It is not thread-safe, so every document is
read under one lock; the worker processes of the analysis pool each have their own.

Bounds: at most ``max_pages`` pages are read (a file that claims a million pages costs no
more than one of ``max_pages``), and reading stops once the text read reaches ``max_chars``
characters. The body's own size is bounded before it gets here (the fetcher's
``max_page_bytes``), and in a worker the page's CPU deadline covers the whole document.

Each page's text is ``normalize_text``-ed on its own, so a page's text never runs into the
next one's. A file that needs a password is ``ExtractionFailed`` ``encrypted``; one whose
pages hold no text at all (a scan: pictures of text) ``no_text_layer``; one PDFium cannot
open ``parser_error``. A file encrypted only against editing (no password to open it) is
read, as any PDF viewer shows it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Final

from ..errors import ExtractionFailed
from ._extract import normalize_text

__all__ = ["PDF_TYPE", "PdfText", "extract_pdf", "is_pdf"]

#: The media type of a PDF response.
PDF_TYPE: Final = "application/pdf"
# PDFium's "a password is required" (FPDF_ERR_PASSWORD).
_PASSWORD_ERROR: Final = 4
_LOCK = threading.Lock()


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


def extract_pdf(body: bytes, url: str, *, max_pages: int, max_chars: int) -> PdfText:
    """The text of the first ``max_pages`` pages of the PDF ``body`` (module docstring).
    Raises ``ExtractionFailed`` (``encrypted``, ``no_text_layer``, ``parser_error``)."""
    import pypdfium2 as pdfium  # type: ignore[import-untyped]

    with _LOCK:
        try:
            document = pdfium.PdfDocument(body)
        except pdfium.PdfiumError as exc:
            reason = "encrypted" if getattr(exc, "err_code", None) == _PASSWORD_ERROR else None
            raise ExtractionFailed(url, reason=reason or "parser_error") from None
        try:
            page_count = len(document)
            pages = _page_texts(document, min(page_count, max_pages), max_chars)
            title = normalize_text(str(document.get_metadata_value("Title") or ""))
        except pdfium.PdfiumError:
            raise ExtractionFailed(url, reason="parser_error") from None
        finally:
            document.close()
    if not any(pages):
        raise ExtractionFailed(url, reason="no_text_layer")
    return PdfText(pages=pages, page_count=page_count, title=" ".join(title.split("\n")))


def _page_texts(document: Any, count: int, max_chars: int) -> tuple[str, ...]:
    """The normalized text of the first ``count`` pages, stopping once ``max_chars``
    characters were read (the page that crosses it is cut there)."""
    texts: list[str] = []
    total = 0
    for index in range(count):
        page = document[index]
        try:
            textpage = page.get_textpage()
            try:
                text = normalize_text(textpage.get_text_bounded())
            finally:
                textpage.close()
        finally:
            page.close()
        texts.append(text[: max_chars - total])
        total += len(texts[-1])
        if total >= max_chars:
            break
    return tuple(texts)
