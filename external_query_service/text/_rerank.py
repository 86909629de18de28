"""The second scoring pass: snippets chosen page by page, ranked over the whole question.

Each page's snippets were scored against that page's own chunks, so a word common on one page
and rare elsewhere weighs differently from page to page and the scores do not compare across
pages. ``rerank`` describes every snippet again with one ``TermStats`` — the sum of the term
statistics of every chunk of every page gathered for the question — and ranks them with the
fitted ranker (``ranker``): its calibrated probability that the snippet holds the answer is the
snippet's score (basis points), scaled by the share of the plan's targets the snippet names
(``(6 + 4 × share) / 10``, the target weight of ``score``) when there are targets. Nothing is
dropped here; ``Reranked.reaches`` says whether a snippet reaches the ranker's threshold, and
the caller refuses a question none of whose snippets does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ._chunk import Chunk
from ._ranker import RankerModel, RankerPassage, load_model
from ._ranker import features as ranker_features
from ._score import QUERY_WEIGHT, TARGET_WEIGHT, TermStats, score_chunks

__all__ = ["Candidate", "Reranked", "rerank"]


@dataclass(frozen=True)
class Candidate:
    """A snippet's text, the query it was gathered for and where it comes from: its page's
    title, the page's rank among the hits (0 first) and the snippet's offset on the page."""

    text: str
    query: str
    title: str = ""
    page: int = 0
    offset: int = 0


@dataclass(frozen=True)
class Reranked:
    """``passages[index]`` scores ``score`` basis points in the second pass; ``reaches`` when
    its calibrated probability reaches the ranker's threshold."""

    index: int
    score: int
    reaches: bool = True


def rerank(
    passages: Sequence[Candidate],
    stats: TermStats,
    targets: Sequence[str] = (),
    *,
    model: RankerModel | None = None,
) -> list[Reranked]:
    """Every passage once, best first (by score, then by the ranker's fitted score); equal
    scores keep the input order (deterministic). ``model`` defaults to the packaged one."""
    model = model or load_model()
    ranked: dict[int, tuple[int, float, bool]] = {}
    by_query: dict[str, list[int]] = {}
    for index, passage in enumerate(passages):
        by_query.setdefault(passage.query, []).append(index)
    for query, indexes in by_query.items():
        chosen = [passages[i] for i in indexes]
        rows = ranker_features(
            query, [RankerPassage(c.text, c.title, c.page, c.offset) for c in chosen], stats
        )
        shares = _target_shares(chosen, indexes, query, targets, stats)
        for i, row in zip(indexes, rows, strict=True):
            probability = model.probability(row)
            scale = (QUERY_WEIGHT + TARGET_WEIGHT * shares[i]) / (QUERY_WEIGHT + TARGET_WEIGHT)
            score = max(0, min(10000, round(10000 * probability * scale)))
            ranked[i] = (score, model.score(row), probability >= model.threshold)
    order = sorted(ranked, key=lambda i: (-ranked[i][0], -ranked[i][1], i))
    return [Reranked(i, ranked[i][0], ranked[i][2]) for i in order]


def _target_shares(
    chosen: Sequence[Candidate],
    indexes: Sequence[int],
    query: str,
    targets: Sequence[str],
    stats: TermStats,
) -> dict[int, float]:
    """The share of ``targets`` each passage names (1 without targets)."""
    if not targets:
        return dict.fromkeys(indexes, 1.0)
    distinct = len(dict.fromkeys(targets))
    # The offset carries the input position back through the scorer.
    chunks = [Chunk(i, len(c.text), c.text) for i, c in zip(indexes, chosen, strict=True)]
    return {
        scored.chunk.offset: min(1.0, len(scored.target_hits) / distinct)
        for scored in score_chunks(chunks, query, targets, stats=stats)
    }
