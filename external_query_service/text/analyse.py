"""One page body → its text, metadata and best snippets: decode → extract → chunk → score.

Chunks leave out the lines of the main text that are navigation (``boilerplate``: the
page's link texts, trails of links), so no snippet opens with a menu."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

from .boilerplate import navigation_filter
from .chunk import Chunk, chunk_text
from .dates import find_dates
from .decode import decode_body
from .extract import extract_page
from .score import MIN_SCORE, ScoredChunk, TermStats, score_with_stats

__all__ = ["PageAnalysis", "analyse_page", "analysis_from_json", "analysis_to_json"]


@dataclass(frozen=True)
class PageAnalysis:
    """What a page yields as evidence.

    ``text`` is the normalized main text (snippet offsets point into it); ``about_dates`` are
    the explicit dates written in the title and the chosen snippets, in that order (Chinese
    month-day dates without a year take theirs from ``published_at``);
    ``snippets`` may be empty when no chunk reaches the score floor; ``stats`` counts the terms
    of all the page's chunks, for a second pass that weighs rarity across pages (``rerank``).
    """

    text: str
    title: str
    published_at: date | None
    about_dates: tuple[date, ...]
    snippets: tuple[ScoredChunk, ...]
    encoding: str
    stats: TermStats


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
) -> PageAnalysis:
    """Decode, extract, chunk and score one page; keep up to ``max_snippets`` chunks scoring
    at least ``min_score``. Raises ``ExtractionFailed``."""
    decoded = decode_body(body, declared_charset, content_type=content_type)
    page = extract_page(decoded.text, url, content_type=content_type)
    chunks = chunk_text(page.text, skip_line=navigation_filter(decoded.text))
    scored, stats = score_with_stats(chunks, query, targets)
    snippets = tuple(item for item in scored if item.score >= min_score)[: max(max_snippets, 0)]
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


def analysis_to_json(analysis: PageAnalysis) -> bytes:
    """``analysis`` as UTF-8 JSON that ``analysis_from_json`` turns back into an equal one
    (texts, offsets, scores and term sets unchanged): a form other processes can share
    without running code from it."""
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
        "chunk_terms": [sorted(terms) for terms in analysis.stats.chunk_terms],
    }
    return json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def analysis_from_json(data: bytes) -> PageAnalysis:
    """The ``PageAnalysis`` that ``analysis_to_json`` wrote; ``ValueError`` (or ``KeyError``,
    ``TypeError``) for anything else."""
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
        stats=TermStats(tuple({str(term) for term in terms} for terms in document["chunk_terms"])),
    )
