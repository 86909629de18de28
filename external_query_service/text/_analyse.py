"""One page body → its text, metadata and best snippets: decode → extract → chunk → score.

A PDF body (``application/pdf``) is read page by page instead (``pdf.py``): its pages' texts
are joined in order, each page chunked on its own (no chunk runs across two pages), and the
analysis says where each page begins (``PageAnalysis.pages``), so evidence can name the page
a snippet is on. The HTML length floor does not apply to a PDF: a page with one sentence is
text like any other.

Chunks leave out the lines of the main text that are navigation (``boilerplate``: the
page's link texts, trails of links), so no snippet opens with a menu.

A ``PageAnalysis`` pickles as a compact record of plain values (``analysis_to_record``): the
text once (snippets are offsets into it), every distinct term of the page once with the number
of chunks it occurs in (the page's ``TermStats``), and the snippets' own cut (term counts as
indexes into those terms, and folded text), which the receiving process keeps
(``score.remember_terms``) so that the second pass does not cut them again. That is what an
analysis worker sends back, and what a memo keeps.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date
from itertools import count
from typing import Any

from ._boilerplate import navigation_filter
from ._chunk import Chunk, chunk_text
from ._dates import find_dates
from ._decode import decode_body
from ._extract import extract_page
from ._pdf import extract_pdf, is_pdf
from ._score import MIN_SCORE, ScoredChunk, TermStats, remember_terms, score_with_stats, text_terms

__all__ = [
    "PDF_MAX_PAGES",
    "PageAnalysis",
    "analyse_page",
    "analysis_from_json",
    "analysis_from_record",
    "analysis_to_json",
    "analysis_to_record",
]

#: Pages of a PDF read when the caller names no other bound (``[analysis] pdf_max_pages``).
PDF_MAX_PAGES = 50
#: Characters of text a PDF may yield: the same bound as a page body's bytes by default.
_PDF_MAX_CHARS = 2_000_000
#: The largest of the ints every Python process holds once and shares (so an analysis does not
#: hold a count up to it).
_SHARED_INTS = 256


@dataclass(frozen=True)
class PageAnalysis:
    """What a page yields as evidence.

    ``text`` is the normalized main text (snippet offsets point into it); ``about_dates`` are
    the explicit dates written in the title and the chosen snippets, in that order (Chinese
    month-day dates without a year take theirs from ``published_at``);
    ``snippets`` may be empty when no chunk reaches the score floor; ``stats`` counts the terms
    of all the page's chunks (in how many chunks each occurs), for a second pass that weighs
    rarity across pages (``rerank``).
    ``pages`` is a PDF's (page number, offset in ``text`` where that page's text begins) for
    every page with text, in order; empty for any other page (``page_at``).
    """

    text: str
    title: str
    published_at: date | None
    about_dates: tuple[date, ...]
    snippets: tuple[ScoredChunk, ...]
    encoding: str
    stats: TermStats
    pages: tuple[tuple[int, int], ...] = ()

    def held_bytes(self) -> int:
        """The memory this analysis holds (``memo.held_bytes``' count, which it matches)
        without visiting every object one by one: its term frequencies are most of it, and
        their terms are distinct strings, their counts small ints that Python shares (up to
        256) or ints of their own."""
        size = sys.getsizeof
        stats = self.stats
        frequencies = stats.frequencies
        # Counted when this analysis was read from a record (``_counted_bytes``), else now.
        counted = self.__dict__.get("_terms_bytes")
        if counted is None:
            counted = _counted_bytes(frequencies, frequencies.values())
        total = size(frequencies) + counted
        total += size(stats) + size(stats.__dict__) + size(stats.chunks) + size(stats.term_total)
        total += size(self) + size(self.__dict__) + size(self.text) + size(self.title)
        total += size(self.encoding) + size(self.snippets) + size(self.about_dates)
        total += sum(map(size, self.about_dates)) + size(self.pages)
        total += sum(size(page) + size(page[0]) + size(page[1]) for page in self.pages)
        for item in self.snippets:
            chunk = item.chunk
            total += size(item) + size(item.__dict__) + size(chunk) + size(chunk.__dict__)
            total += size(chunk.text) + size(item.target_hits) + sum(map(size, item.target_hits))
            total += size(chunk.offset) + size(chunk.length) + size(item.score)
            total += size(item.query_score)
        return total

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # Pickled as its compact record (module docstring), not field by field.
        return analysis_from_record, (analysis_to_record(self),)

    def page_at(self, offset: int) -> int | None:
        """The PDF page number the text at ``offset`` is on; None for a page that is not a
        PDF's."""
        found = None
        for number, start in self.pages:
            if start > offset:
                break
            found = number
        return found


def _counted_bytes(terms: Iterable[str], counts: Iterable[int]) -> int:
    """What the terms and counts of a ``TermStats`` hold besides its map: each term string
    (the terms are distinct objects) and each count that is not one of the ints Python
    shares."""
    size = sys.getsizeof
    return sum(map(size, terms)) + sum(map(size, filter(_SHARED_INTS.__lt__, counts)))


def analyse_page(
    body: bytes,
    *,
    url: str,
    declared_charset: str | None,
    content_type: str,
    query: str,
    targets: Sequence[str] = (),
    max_snippets: int = 2,
    min_score: int = MIN_SCORE,
    pdf_max_pages: int = PDF_MAX_PAGES,
) -> PageAnalysis:
    """Decode, extract, chunk and score one page; keep up to ``max_snippets`` chunks scoring
    at least ``min_score``. A PDF is read up to ``pdf_max_pages`` pages (module docstring).
    Raises ``ExtractionFailed``."""
    if is_pdf(content_type):
        return _analyse_pdf(
            body,
            url=url,
            query=query,
            targets=targets,
            limit=max_snippets,
            min_score=min_score,
            max_pages=pdf_max_pages,
        )
    decoded = decode_body(body, declared_charset, content_type=content_type)
    page = extract_page(decoded.text, url, content_type=content_type, query=query)
    chunks = chunk_text(page.text, skip_line=navigation_filter(decoded.text))
    scored, stats = score_with_stats(chunks, query, targets, keep=max_snippets)
    snippets = _best(scored, min_score, max_snippets)
    dated = "\n".join([page.title, *(item.chunk.text for item in snippets)])
    return PageAnalysis(
        text=page.text,
        title=page.title,
        published_at=page.published_at,
        about_dates=find_dates(dated, reference=page.published_at),
        snippets=snippets,
        encoding=decoded.encoding,
        stats=stats,
    )


def _analyse_pdf(
    body: bytes,
    *,
    url: str,
    query: str,
    targets: Sequence[str],
    limit: int,
    min_score: int,
    max_pages: int,
) -> PageAnalysis:
    document = extract_pdf(body, url, max_pages=max_pages, max_chars=_PDF_MAX_CHARS)
    parts: list[str] = []
    pages: list[tuple[int, int]] = []
    chunks: list[Chunk] = []
    offset = 0
    for number, page_text in enumerate(document.pages, start=1):
        if not page_text:
            continue
        if parts:
            offset += 1  # the "\n" between two pages
        pages.append((number, offset))
        parts.append(page_text)
        chunks += [
            Chunk(offset + item.offset, item.length, item.text) for item in chunk_text(page_text)
        ]
        offset += len(page_text)
    text = "\n".join(parts)
    scored, stats = score_with_stats(chunks, query, targets, keep=limit)
    snippets = _best(scored, min_score, limit)
    title = document.title or parts[0].split("\n", 1)[0][:200]
    dated = "\n".join([title, *(item.chunk.text for item in snippets)])
    return PageAnalysis(
        text=text,
        title=title,
        published_at=None,
        about_dates=find_dates(dated),
        snippets=snippets,
        encoding="pdf",
        stats=stats,
        pages=tuple(pages),
    )


def _best(scored: Sequence[ScoredChunk], min_score: int, limit: int) -> tuple[ScoredChunk, ...]:
    return tuple(item for item in scored if item.score >= min_score)[: max(limit, 0)]


def analysis_to_json(analysis: PageAnalysis) -> bytes:
    """``analysis`` as UTF-8 JSON that ``analysis_from_json`` turns back into an equal one
    (texts, offsets, scores and term statistics unchanged): a form other processes can share
    without running code from it. The terms are written in sorted order, so the same
    analysis writes the same bytes in every process."""
    document = {
        "text": analysis.text,
        "title": analysis.title,
        "published_at": analysis.published_at.isoformat() if analysis.published_at else None,
        "about_dates": [item.isoformat() for item in analysis.about_dates],
        "snippets": [
            [
                item.chunk.offset,
                item.chunk.length,
                item.chunk.text,
                item.score,
                item.query_score,
                list(item.target_hits),
            ]
            for item in analysis.snippets
        ],
        "encoding": analysis.encoding,
        "chunks": analysis.stats.chunks,
        "frequencies": dict(sorted(analysis.stats.frequencies.items())),
        "term_total": analysis.stats.term_total,
        "pages": [list(item) for item in analysis.pages],
    }
    return json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def analysis_from_json(data: bytes) -> PageAnalysis:
    """The ``PageAnalysis`` that ``analysis_to_json`` wrote; ``ValueError`` (or ``KeyError``,
    ``TypeError``) for anything else, the form of earlier versions too (one term list per
    chunk): the shared cache drops such an entry and the page is analysed again."""
    document: dict[str, Any] = json.loads(data.decode("utf-8"))
    published = document["published_at"]
    return PageAnalysis(
        text=str(document["text"]),
        title=str(document["title"]),
        published_at=date.fromisoformat(published) if published is not None else None,
        about_dates=tuple(date.fromisoformat(item) for item in document["about_dates"]),
        snippets=tuple(
            ScoredChunk(
                chunk=Chunk(offset=int(offset), length=int(length), text=str(text)),
                score=int(score),
                query_score=int(query_score),
                target_hits=tuple(str(hit) for hit in hits),
            )
            for offset, length, text, score, query_score, hits in document["snippets"]
        ),
        encoding=str(document["encoding"]),
        stats=TermStats(
            int(document["chunks"]),
            {str(term): int(n) for term, n in document["frequencies"].items()},
            int(document["term_total"]),
        ),
        pages=tuple((int(number), int(start)) for number, start in document.get("pages", ())),
    )


#: The layout of ``analysis_to_record``'s tuples; a record of another layout is refused.
_RECORD_VERSION = 2


def analysis_to_record(analysis: PageAnalysis) -> tuple[Any, ...]:
    """``analysis`` as a tuple of plain values (str, int, None and tuples of them) that
    ``analysis_from_record`` turns back into an equal one: the page text once, the snippets as
    offsets into it with their cut, and the page's term statistics as its distinct terms (the
    vocabulary, which the snippets' cut indexes too) with their document frequencies."""
    stats = analysis.stats
    frequencies = stats.frequencies
    # The counted terms first, numbered in order; a snippet's term they lack (none, when the
    # snippets are the page's chunks) takes the next number.
    numbers = count()
    vocabulary: defaultdict[str, int] = defaultdict(
        numbers.__next__, zip(frequencies, numbers, strict=False)
    )
    index = vocabulary.__getitem__
    snippets = []
    for item in analysis.snippets:
        chunk = item.chunk
        sliced = analysis.text[chunk.offset : chunk.offset + chunk.length] == chunk.text
        cut = text_terms(chunk.text)
        snippets.append(
            (
                chunk.offset,
                chunk.length,
                None if sliced else chunk.text,
                item.score,
                item.query_score,
                item.target_hits,
                tuple(index(term) for term in cut.counts),
                tuple(cut.counts.values()),
                None if cut.folded == chunk.text else cut.folded,  # folding changed nothing
            )
        )
    return (
        _RECORD_VERSION,
        analysis.text,
        analysis.title,
        analysis.published_at.toordinal() if analysis.published_at else None,
        tuple(day.toordinal() for day in analysis.about_dates),
        tuple(snippets),
        analysis.encoding,
        tuple(vocabulary),
        tuple(frequencies.values()),
        stats.chunks,
        stats.term_total,
        analysis.pages,
    )


def analysis_from_record(record: tuple[Any, ...]) -> PageAnalysis:
    """The ``PageAnalysis`` that ``analysis_to_record`` made; the snippets' cut is kept for
    this process (``score.remember_terms``). ``ValueError`` for a record of another layout."""
    if not record or record[0] != _RECORD_VERSION:
        raise ValueError("not a page analysis record of this version")
    _, text, title, published, about, snippets, encoding = record[:7]
    vocabulary, frequencies, chunks, term_total, pages = record[7:]
    scored = []
    for offset, length, own, score, query_score, hits, term_ids, counts, folded in snippets:
        snippet_text = text[offset : offset + length] if own is None else own
        cut = dict(zip((vocabulary[i] for i in term_ids), counts, strict=True))
        remember_terms(snippet_text, cut, snippet_text if folded is None else folded)
        scored.append(ScoredChunk(Chunk(offset, length, snippet_text), score, query_score, hits))
    # The vocabulary's first terms are the counted ones (``zip`` stops with the counts).
    counted = dict(zip(vocabulary, frequencies, strict=False))
    analysis = PageAnalysis(
        text=text,
        title=title,
        published_at=date.fromordinal(published) if published is not None else None,
        about_dates=tuple(date.fromordinal(day) for day in about),
        snippets=tuple(scored),
        encoding=encoding,
        stats=TermStats(chunks, counted, term_total),
        pages=pages,
    )
    # ``held_bytes``' count of the terms and counts, made here, where the record is read (an
    # analysis worker's reply, off the event loop): the service sizes each analysis it keeps
    # on the loop, and sizing every term string was most of that count.
    object.__setattr__(analysis, "_terms_bytes", _counted_bytes(counted, frequencies))
    return analysis
