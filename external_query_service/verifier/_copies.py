"""Near-duplicate evidence: one article copied onto several sites is one source.

Two web evidence texts (a page body, a search snippet, a provider's extraction) are copies
when the Jaccard similarity of their word-shingle sets is at least ``COPY_SIMILARITY``.
Words are runs of letters or digits, and each CJK character is a word of its own (Chinese
is written without spaces); shingles are ``SHINGLE_WORDS`` consecutive words, after NFKC
and case folding.

MinHash estimates exactly this Jaccard similarity, and pays off where millions of texts
are compared. A bundle holds at most a few dozen admitted evidence, so the similarity is
computed exactly on the shingle sets instead: no estimate to tune, and no ``datasketch``
(which brings numpy and scipy) for what a set intersection does.

Of each group, the original is the earliest published, else the first ranked (the
verifier's order); the others are its copies. Fact API and documentation evidence are
never copies: their texts are templated, and two providers agreeing is not one source.

Pure: no I/O.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from datetime import date

from ..models import CopyGroup, Evidence

__all__ = ["COPY_SIMILARITY", "SHINGLE_WORDS", "copy_groups", "similarity"]

#: Shingle similarity from which two texts are one text copied.
COPY_SIMILARITY = 0.7
SHINGLE_WORDS = 3
#: Texts shorter than this many words are too short to call copies of one another.
_MIN_WORDS = 8
_WORDS = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]|[^\W_\u3400-\u9fff\uf900-\ufaff]+")
_WEB_BASES = frozenset({"page_body", "search_snippet", "provider_text"})


def _shingles(text: str) -> frozenset[tuple[str, ...]]:
    words = _WORDS.findall(unicodedata.normalize("NFKC", text).casefold())
    if len(words) < _MIN_WORDS:
        return frozenset()
    return frozenset(
        tuple(words[i : i + SHINGLE_WORDS]) for i in range(len(words) - SHINGLE_WORDS + 1)
    )


def similarity(left: str, right: str) -> float:
    """The Jaccard similarity of the two texts' word-shingle sets (0 for short texts)."""
    return _jaccard(_shingles(left), _shingles(right))


def _jaccard(left: frozenset[tuple[str, ...]], right: frozenset[tuple[str, ...]]) -> float:
    if not left or not right:
        return 0.0
    return len(left & right) / len(left | right)


def copy_groups(ranked: Sequence[Evidence]) -> tuple[CopyGroup, ...]:
    """The groups of copies among ``ranked`` (best first), each with its original."""
    shingles = {item.evidence_id: _shingles(item.snippet) for item in ranked}
    groups: list[list[Evidence]] = []
    for item in ranked:
        if item.basis not in _WEB_BASES or not shingles[item.evidence_id]:
            continue
        mine = shingles[item.evidence_id]
        home = next(
            (
                group
                for group in groups
                if _jaccard(mine, shingles[group[0].evidence_id]) >= COPY_SIMILARITY
            ),
            None,
        )
        if home is None:
            groups.append([item])
        elif all(member.url != item.url for member in home):
            home.append(item)
    found = []
    for group in groups:
        if len(group) < 2:
            continue
        original = min(group, key=lambda item: (_published(item), group.index(item)))
        copies = tuple(item for item in group if item is not original)
        lowest = min(
            _jaccard(shingles[original.evidence_id], shingles[copy.evidence_id]) for copy in copies
        )
        found.append(
            CopyGroup(
                original=original.evidence_id,
                copies=tuple(copy.evidence_id for copy in copies),
                similarity=round(lowest, 3),
            )
        )
    return tuple(found)


def _published(item: Evidence) -> date:
    return item.published_at or date.max
