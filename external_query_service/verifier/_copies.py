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

Two texts that differ in the value asked (the caller says which, ``apart``) are never
copies: a copy group must never hide a differing value.

Of each group, the original is the earliest published, else the first ranked (the
verifier's order); the others are its copies. Fact API and documentation evidence are
never copies: their texts are templated, and two providers agreeing is not one source.

Pure: no I/O.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence
from datetime import date

from ..models import CopyGroup, Evidence

__all__ = ["COPY_SIMILARITY", "SHINGLE_WORDS", "copy_groups", "similarity"]

#: Shingle similarity from which two texts are one text copied.
COPY_SIMILARITY = 0.7
SHINGLE_WORDS = 3
#: Texts shorter than this many words are too short to call copies of one another.
_MIN_WORDS = 8
_CJK_CLASS = "\u3400-\u9fff\uf900-\ufaff"
#: The words shingled: each CJK character alone, and each run of other letters or digits.
_WORDS = re.compile(f"[{_CJK_CLASS}]|[^\\W_{_CJK_CLASS}]+")
#: ``_WORDS`` a run at a time: a run of CJK characters (each a word of ``_WORDS``) in the
#: first group, a run of other letters or digits (one word) in the second.
_RUNS = re.compile(f"([{_CJK_CLASS}]+)|([^\\W_{_CJK_CLASS}]+)")
_WEB_BASES = frozenset({"page_body", "search_snippet", "provider_text"})
#: Characters common in CJK text whose compatibility decomposition is one other character:
#: full-width punctuation and the ideographic space (``_nfkc``).
_SINGLE_DECOMPOSITIONS = tuple(
    (char, plain)
    for char in "，：；！？（）　"
    if len(plain := unicodedata.normalize("NFKD", char)) == 1 and plain != char
)


def _nfkc(text: str) -> str:
    """``unicodedata.normalize("NFKC", text)``, cheaper for CJK text.

    NFKC decomposes each character on its own (fully, compatibility mappings included),
    puts the combining marks of the result in canonical order, then composes. A character
    whose full decomposition is the one character ``plain`` decomposes exactly as ``plain``
    does, so writing ``plain`` in its place first changes nothing NFKC gives. It does
    change what NFKC has to do: Chinese text whose only characters NFKC would change are
    its full-width commas and colons is then normalized already, which ``normalize``
    finds with a quick check instead of decomposing and composing every character."""
    for char, plain in _SINGLE_DECOMPOSITIONS:
        if char in text:
            text = text.replace(char, plain)
    return unicodedata.normalize("NFKC", text)


def _words(text: str) -> list[str]:
    """``_WORDS.findall(text)``, with one match per run of CJK characters rather than one
    per character (Chinese runs on for a clause between punctuation marks)."""
    words: list[str] = []
    for cjk, other in _RUNS.findall(text):
        if cjk:
            words.extend(cjk)
        else:
            words.append(other)
    return words


def _shingles(text: str) -> frozenset[tuple[str, ...]]:
    words = _words(_nfkc(text).casefold())
    if len(words) < _MIN_WORDS:
        return frozenset()
    # Each run of SHINGLE_WORDS consecutive words, zipped from shifted copies (in C; the
    # shifted copies are shorter, so the last words start no shingle of their own).
    return frozenset(zip(*(words[shift:] for shift in range(SHINGLE_WORDS)), strict=False))


def similarity(left: str, right: str) -> float:
    """The Jaccard similarity of the two texts' word-shingle sets (0 for short texts)."""
    return _jaccard(_shingles(left), _shingles(right))


def _jaccard(left: frozenset[tuple[str, ...]], right: frozenset[tuple[str, ...]]) -> float:
    if not left or not right:
        return 0.0
    shared = len(left & right)
    return shared / (len(left) + len(right) - shared)  # the union's size, without building it


def _may_copy(left: frozenset[tuple[str, ...]], right: frozenset[tuple[str, ...]]) -> bool:
    # The similarity is at most the smaller set's size over the larger's (both non-empty):
    # most pairs of unrelated texts of unlike lengths are settled by their sizes alone.
    small, large = sorted((len(left), len(right)))
    return small / large >= COPY_SIMILARITY


def copy_groups(
    ranked: Sequence[Evidence], *, apart: Callable[[Evidence, Evidence], bool] | None = None
) -> tuple[CopyGroup, ...]:
    """The groups of copies among ``ranked`` (best first), each with its original.

    ``apart(one, other)`` says two texts differ in the value asked: such texts are never in
    one group, however alike, since two texts alike but for that value are two sources
    that disagree (the strongest sign of it), not one copied."""
    # Shingled once per distinct text (snippets of one page may repeat), and only for the
    # evidence that can be a copy at all.
    by_text: dict[str, frozenset[tuple[str, ...]]] = {}
    shingles: dict[str, frozenset[tuple[str, ...]]] = {}
    for item in ranked:
        if item.basis in _WEB_BASES:
            found = by_text.get(item.snippet)
            if found is None:
                found = by_text[item.snippet] = _shingles(item.snippet)
            shingles[item.evidence_id] = found
    # Each member's similarity to its group's first, as measured when it joined.
    joined: dict[str, float] = {}
    groups: list[list[Evidence]] = []
    for item in ranked:
        mine = shingles.get(item.evidence_id)
        if not mine:
            continue
        home = None
        for group in groups:
            first = shingles[group[0].evidence_id]
            if _may_copy(mine, first):
                measured = _jaccard(mine, first)
                if measured >= COPY_SIMILARITY:
                    if apart is not None and any(apart(member, item) for member in group):
                        continue
                    home = group
                    break
        if home is None:
            groups.append([item])
        elif all(member.url != item.url for member in home):
            home.append(item)
            joined[item.evidence_id] = measured
    groups_found = []
    for group in groups:
        if len(group) < 2:
            continue
        original = min(group, key=lambda item: (_published(item), group.index(item)))
        copies = tuple(item for item in group if item is not original)
        # The similarity is symmetric: a copy of the group's first was measured already.
        lowest = min(
            joined[copy.evidence_id]
            if original is group[0]
            else _jaccard(shingles[original.evidence_id], shingles[copy.evidence_id])
            for copy in copies
        )
        groups_found.append(
            CopyGroup(
                original=original.evidence_id,
                copies=tuple(copy.evidence_id for copy in copies),
                similarity=round(lowest, 3),
            )
        )
    return tuple(groups_found)


def _published(item: Evidence) -> date:
    return item.published_at or date.max
