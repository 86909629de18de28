"""The second scoring pass: snippets chosen page by page, re-scored over the whole question.

Each page's snippets were scored against that page's own chunks, so a word common on one page
and rare elsewhere weighs differently from page to page and the scores do not compare across
pages. ``rerank`` scores every snippet again with one ``TermStats`` — the sum of the term
statistics of every chunk of every page gathered for the question — and returns them best
first. Nothing is dropped: the floor was applied per page.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .chunk import Chunk
from .score import TermStats, score_chunks

__all__ = ["Candidate", "Reranked", "rerank"]


@dataclass(frozen=True)
class Candidate:
    """A snippet's text and the query it was gathered for."""

    text: str
    query: str


@dataclass(frozen=True)
class Reranked:
    """``passages[index]`` scores ``score`` basis points in the second pass."""

    index: int
    score: int


def rerank(
    passages: Sequence[Candidate], stats: TermStats, targets: Sequence[str] = ()
) -> list[Reranked]:
    """Every passage once, best first; equal scores keep the input order (deterministic)."""
    scores: dict[int, int] = {}
    by_query: dict[str, list[int]] = {}
    for index, passage in enumerate(passages):
        by_query.setdefault(passage.query, []).append(index)
    for query, indexes in by_query.items():
        # The offset carries the input position back through the scorer.
        chunks = [Chunk(i, len(passages[i].text), passages[i].text) for i in indexes]
        for scored in score_chunks(chunks, query, targets, stats=stats):
            scores[scored.chunk.offset] = scored.score
    order = sorted(range(len(passages)), key=lambda i: (-scores[i], i))
    return [Reranked(i, scores[i]) for i in order]
