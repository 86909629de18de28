"""One page body → its text, metadata and best snippets: decode → extract → chunk → score."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date

from .chunk import chunk_text
from .dates import find_dates
from .decode import decode_body
from .extract import extract_page
from .score import MIN_SCORE, ScoredChunk, TermStats, score_with_stats

__all__ = ["PageAnalysis", "analyse_page"]


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
    scored, stats = score_with_stats(chunk_text(page.text), query, targets)
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
