"""Chunks → scored chunks: rarity-weighted coverage of the query plus coverage of the targets.

Scores are integer basis points (0..10000) so they can sit inside hashed records; the same
input always gives the same scores and order.

Terms come from ``tokens.terms`` (chunks) and ``tokens.query_terms`` (the query, cut to
``MAX_QUERY_CHARS`` first). Rarity is measured over a *collection* of chunks — the chunks
being scored, or the ``TermStats`` of a larger set passed in (every chunk of every page of a
question, for the second pass in ``rerank``):

- each query term ``t`` weighs ``idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))`` (BM25's
  IDF; ``N`` chunks, ``df`` of them holding ``t``), so a term found in few chunks outweighs
  one found in most of them;
- a chunk earns a term's weight by mentioning it at least once. Repeats and chunk length do
  not count (BM25 with ``b = 0`` and its term-frequency credit capped at one mention): a
  passage that names the question's rare terms once beats a title that repeats its common
  ones, and a readable passage is not penalised for being longer than a fragment;
- ``coverage = Σ idf(t) over mentioned terms / Σ idf(t)`` over the query terms the collection
  holds, and ``query_score = 10000 × coverage × found``, where ``found`` is the share of the
  query's terms the collection holds at all (a page that never uses a query word cannot fully
  answer it).

A target is *hit* when it is fuzzily contained in the chunk: rapidfuzz ``partial_ratio ≥ 90``
(for a two-character name that means an exact match). ``score = query_score`` without
targets; with targets ``score = (6 × query_score + 4 × target_coverage) // 10`` where
``target_coverage = 10000 × hits // distinct targets``. Equal scores keep the earlier chunk
first (and, in ``rerank``, the earlier page: the search engine's order).
"""

from __future__ import annotations

import math
import unicodedata
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from rapidfuzz import fuzz

from .chunk import Chunk
from .tokens import query_terms, terms

__all__ = [
    "MIN_SCORE",
    "ScoredChunk",
    "TermStats",
    "best_snippets",
    "score_chunks",
    "score_with_stats",
    "term_stats",
]

MAX_QUERY_CHARS: Final = 64
TARGET_HIT_RATIO: Final = 90
QUERY_WEIGHT: Final = 6
TARGET_WEIGHT: Final = 4
#: Default floor for ``best_snippets``: a chunk must cover about half of the query's
#: rarity-weighted terms (see bench/snippet_quality.py for where relevant and unrelated
#: chunks fall).
MIN_SCORE: Final = 5000


@dataclass(frozen=True)
class TermStats:
    """Term counts over a collection of chunks: how many ``chunks``, and in how many of them
    each term occurs (``df``). Sums (``+``) are the counts of the union. Treat ``df`` as
    read-only."""

    chunks: int = 0
    df: Mapping[str, int] = field(default_factory=dict)

    def __add__(self, other: TermStats) -> TermStats:
        df = Counter(self.df)
        df.update(other.df)
        return TermStats(self.chunks + other.chunks, dict(df))


def term_stats(term_lists: Iterable[Collection[str]]) -> TermStats:
    """The ``TermStats`` of chunks given as their terms (lists or sets)."""
    chunks = 0
    df: Counter[str] = Counter()
    for chunk_terms in term_lists:
        chunks += 1
        df.update(chunk_terms if isinstance(chunk_terms, set | frozenset) else set(chunk_terms))
    return TermStats(chunks, dict(df))


@dataclass(frozen=True)
class ScoredChunk:
    """A chunk with its combined ``score``, its ``query_score`` (both basis points) and the
    targets (as given) that it contains."""

    chunk: Chunk
    score: int
    query_score: int
    target_hits: tuple[str, ...]


def _fold(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def _contains(target: str, chunk: str) -> bool:
    if target in chunk:
        return True
    if len(chunk) < len(target):
        return False
    return fuzz.partial_ratio(target, chunk, score_cutoff=TARGET_HIT_RATIO) > 0


def _query_points(wanted: Counter[str], present: set[str], stats: TermStats) -> int:
    if not wanted or not present:
        return 0
    chunks = max(stats.chunks, 1)
    weight = credit = 0.0
    held = 0
    for term, times in wanted.items():
        # A chunk scored against borrowed stats may hold a term they never counted.
        df = max(stats.df.get(term, 0), 1 if term in present else 0)
        if not df:
            continue
        held += times
        idf = times * math.log(1 + (chunks - df + 0.5) / (df + 0.5))
        weight += idf
        if term in present:
            credit += idf
    if not weight:
        return 0
    found = held / sum(wanted.values())
    return max(0, min(10000, round(10000 * credit / weight * found)))


def score_chunks(
    chunks: Sequence[Chunk],
    query: str,
    targets: Sequence[str] = (),
    *,
    stats: TermStats | None = None,
) -> list[ScoredChunk]:
    """Score every chunk; sorted by score (highest first), then by offset.

    Rarity comes from ``stats`` when given, else from ``chunks`` themselves.
    """
    return score_with_stats(chunks, query, targets, stats=stats)[0]


def score_with_stats(
    chunks: Sequence[Chunk],
    query: str,
    targets: Sequence[str] = (),
    *,
    stats: TermStats | None = None,
) -> tuple[list[ScoredChunk], TermStats]:
    """``score_chunks`` and the ``TermStats`` of ``chunks`` (cut once for both), so a later
    pass can weigh rarity over several pages without cutting their text again."""
    wanted = Counter(query_terms(query[:MAX_QUERY_CHARS]))
    folded_targets: dict[str, str] = {}  # folded target → the target as given (first wins)
    for target in targets:
        folded = _fold(target)[:MAX_QUERY_CHARS]
        if folded and folded not in folded_targets:
            folded_targets[folded] = target
    chunk_terms = [set(terms(chunk.text)) for chunk in chunks]  # presence is all that counts
    own = term_stats(chunk_terms)
    scored: list[ScoredChunk] = []
    for chunk, its_terms in zip(chunks, chunk_terms, strict=True):
        query_score = _query_points(wanted, its_terms, stats or own)
        if folded_targets:
            folded_chunk = _fold(chunk.text)
            hits = tuple(
                given for folded, given in folded_targets.items() if _contains(folded, folded_chunk)
            )
            coverage = 10000 * len(hits) // len(folded_targets)
            score = (QUERY_WEIGHT * query_score + TARGET_WEIGHT * coverage) // (
                QUERY_WEIGHT + TARGET_WEIGHT
            )
        else:
            hits, score = (), query_score
        scored.append(ScoredChunk(chunk, score, query_score, hits))
    scored.sort(key=lambda item: (-item.score, item.chunk.offset))
    return scored, own


def best_snippets(
    chunks: Sequence[Chunk],
    query: str,
    targets: Sequence[str] = (),
    *,
    limit: int = 2,
    min_score: int = MIN_SCORE,
    stats: TermStats | None = None,
) -> list[ScoredChunk]:
    """The ``limit`` best chunks scoring at least ``min_score``, best first (maybe none)."""
    if limit < 1:
        return []
    scored = score_chunks(chunks, query, targets, stats=stats)
    return [item for item in scored if item.score >= min_score][:limit]
