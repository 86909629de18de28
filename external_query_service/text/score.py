"""Chunks → scored chunks: lexical relevance to the query plus coverage of the plan targets.

Scores are integer basis points (0..10000) so they can sit inside hashed records.

Both sides are folded first (NFKC, case-folded, whitespace collapsed); the query is cut to
``MAX_QUERY_CHARS`` because ``partial_ratio`` costs ``len(query) × len(chunk)``.

- ``query_score`` is the better of two rapidfuzz scores. ``partial_ratio`` finds the best
  aligned stretch of the chunk and works on unsegmented Chinese; when the chunk is shorter
  than the query it is scaled by ``len(chunk) / len(query)``, so a fragment that merely
  occurs inside the query cannot score 100. ``token_set_ratio`` (with
  ``utils.default_process``) ignores word order and extra words in Latin text.
- A target is *hit* when it is fuzzily contained in the chunk: ``partial_ratio ≥ 90``
  (for a two-character name that means an exact match).
- ``score = query_score`` without targets; with targets
  ``score = (6 × query_score + 4 × coverage) // 10`` where
  ``coverage = 10000 × hits // distinct targets``.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from rapidfuzz import fuzz, utils

from .chunk import Chunk

__all__ = [
    "MAX_QUERY_CHARS",
    "MIN_SCORE",
    "QUERY_WEIGHT",
    "TARGET_HIT_RATIO",
    "TARGET_WEIGHT",
    "ScoredChunk",
    "best_snippets",
    "score_chunks",
]

MAX_QUERY_CHARS: Final = 64
TARGET_HIT_RATIO: Final = 90
QUERY_WEIGHT: Final = 6
TARGET_WEIGHT: Final = 4
#: Default floor for ``best_snippets``: about the rapidfuzz cutoff of 60 the docs suggest,
#: tuned on the DuReader questions (see bench/snippet_quality.py).
MIN_SCORE: Final = 5000


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


def _points(ratio: float) -> int:
    return max(0, min(10000, round(ratio * 100)))


def _query_points(query: str, chunk: str) -> int:
    if not query or not chunk:
        return 0
    partial = fuzz.partial_ratio(query, chunk)
    if len(chunk) < len(query):
        partial = partial * len(chunk) / len(query)
    tokens = fuzz.token_set_ratio(query, chunk, processor=utils.default_process)
    return _points(max(partial, tokens))


def _contains(target: str, chunk: str) -> bool:
    if target in chunk:
        return True
    if len(chunk) < len(target):
        return False
    return fuzz.partial_ratio(target, chunk, score_cutoff=TARGET_HIT_RATIO) > 0


def score_chunks(
    chunks: Sequence[Chunk], query: str, targets: Sequence[str] = ()
) -> list[ScoredChunk]:
    """Score every chunk; sorted by score (highest first), then by offset."""
    folded_query = _fold(query)[:MAX_QUERY_CHARS]
    wanted: dict[str, str] = {}  # folded target → the target as given (first spelling wins)
    for target in targets:
        folded = _fold(target)[:MAX_QUERY_CHARS]
        if folded and folded not in wanted:
            wanted[folded] = target
    scored: list[ScoredChunk] = []
    for chunk in chunks:
        folded_chunk = _fold(chunk.text)
        query_score = _query_points(folded_query, folded_chunk)
        hits = tuple(given for folded, given in wanted.items() if _contains(folded, folded_chunk))
        if wanted:
            coverage = 10000 * len(hits) // len(wanted)
            score = (QUERY_WEIGHT * query_score + TARGET_WEIGHT * coverage) // (
                QUERY_WEIGHT + TARGET_WEIGHT
            )
        else:
            score = query_score
        scored.append(ScoredChunk(chunk, score, query_score, hits))
    scored.sort(key=lambda item: (-item.score, item.chunk.offset))
    return scored


def best_snippets(
    chunks: Sequence[Chunk],
    query: str,
    targets: Sequence[str] = (),
    *,
    limit: int = 2,
    min_score: int = MIN_SCORE,
) -> list[ScoredChunk]:
    """The ``limit`` best chunks scoring at least ``min_score``, best first (maybe none)."""
    if limit < 1:
        return []
    return [item for item in score_chunks(chunks, query, targets) if item.score >= min_score][
        :limit
    ]
