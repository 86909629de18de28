"""A question asked in parts, read from its structure: which parts, and what tells them apart.

Two structures make parts, and nothing else (no list of words over the question):

- **sentences**: a question of two or more sentences, each ending in a question mark
  (``？`` or ``?``), asks each one; each sentence is a part;
- **a coordination**: where the segmenter (jieba's part-of-speech tags) gives a conjunction
  (tag ``c``) or an enumeration comma (``、``) between two runs of words of one class
  (nominal words, tags ``n…``, ``eng``, ``j``; numerals, ``m``; time words, ``t``), each
  run is a part: ``2020年甲公司和乙公司的销量分别是多少`` asks about ``甲公司`` and
  ``乙公司``, ``2024年和2025年比亚迪的销量`` about ``2024年`` and ``2025年``. The first such
  coordination is read.

A part's *terms* are what tell it from the others: its index terms (``tokens.query_terms``)
that no other part has. A passage *covers* a part when it holds at least ``COVERED_SHARE``
of those terms (``covers``), and the passage that holds the largest share of them speaks
for it best (``share``): the passages that answer split the question where each holds the
terms of only some parts.

``part_question`` writes the question one part asks: the sentence itself, or the question
with its coordination replaced by the one part (``2020年乙公司的销量分别是多少``), the
query a second search round sends for a part no passage covers.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Literal

from ._tokens import _jieba, query_terms

__all__ = ["COVERED_SHARE", "Part", "covers", "part_question", "question_parts", "share"]

#: The share of a part's own terms a passage must hold to cover it: a passage that answers
#: rarely repeats the question's words (chosen on the agreement bench's fitting halves among
#: a half, a third and a fifth).
COVERED_SHARE = 0.2
_NOMINAL_TAGS = ("n", "eng", "j")
_ENUMERATION = "、"
_PREPOSITION = "p"
_POSSESSIVE = "uj"
_QUESTION_ENDS = "？?"


@dataclass(frozen=True, slots=True)
class Part:
    """One part: ``text`` as the question writes it, at ``start``..``end`` in it; ``by``
    says which structure made it; ``terms`` are its own index terms."""

    text: str
    start: int
    end: int
    by: Literal["sentence", "coordination"]
    terms: frozenset[str]


def question_parts(question: str) -> tuple[Part, ...]:
    """The parts of ``question`` (see the module docstring); ``()`` when it asks one thing."""
    spans = _sentences(question) or _coordination(question)
    if len(spans) < 2:
        return ()
    by: Literal["sentence", "coordination"] = "sentence" if _sentences(question) else "coordination"
    all_terms = [frozenset(query_terms(question[start:end])) for start, end in spans]
    parts = []
    for index, (start, end) in enumerate(spans):
        others = frozenset().union(*(t for i, t in enumerate(all_terms) if i != index))
        own = all_terms[index] - others
        if not own:
            return ()  # a part nothing tells from the others is no part
        parts.append(Part(question[start:end].strip(), start, end, by, own))
    return tuple(parts)


def _sentences(question: str) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    start = 0
    for index, char in enumerate(question):
        if char in _QUESTION_ENDS:
            if question[start:index].strip():
                spans.append((start, index + 1))
            start = index + 1
    return spans if len(spans) >= 2 else []


def _coordination(question: str) -> list[tuple[int, int]]:
    """The nominal runs joined by the question's first coordination, as offsets."""
    tagged: list[tuple[str, str, int]] = []
    offset = 0
    for word, tag in _jieba().tag(question):
        tagged.append((word, tag, offset))
        offset += len(word)
    for index, (word, tag, _at) in enumerate(tagged):
        if not _joins(word, tag):
            continue
        left = _run(tagged, index - 1, -1)
        right = _run(tagged, index + 1, 1)
        if left is None or right is None:
            continue
        if tag == _PREPOSITION and not _coordinates(tagged, index, right):
            continue
        spans = [left, right]
        # Further conjuncts: 甲、乙和丙.
        before = left[0]
        at = _index_at(tagged, before) - 1
        while at >= 1 and _joins(*tagged[at][:2]):
            more = _run(tagged, at - 1, -1)
            if more is None:
                break
            spans.insert(0, more)
            at = _index_at(tagged, more[0]) - 1
        at = _index_at(tagged, right[1], end=True) + 1
        while at < len(tagged) - 1 and _joins(*tagged[at][:2]):
            more = _run(tagged, at + 1, 1)
            if more is None:
                break
            spans.append(more)
            at = _index_at(tagged, more[1], end=True) + 1
        return spans
    return []


def _joins(word: str, tag: str) -> bool:
    return tag in ("c", _PREPOSITION) or word == _ENUMERATION


def _coordinates(tagged: list[tuple[str, str, int]], index: int, right: tuple[int, int]) -> bool:
    """Whether the preposition at ``index`` joins its two sides as a conjunction would (see
    the module docstring): ``A与B的X``, not ``A在B的X`` nor ``A与B合作``."""
    if tagged[index - 1][1] != tagged[index + 1][1]:
        return False
    after = _index_at(tagged, right[1], end=True) + 1
    while after < len(tagged) and tagged[after][1] in ("m", "t"):
        after += 1
    return after < len(tagged) and tagged[after][1] == _POSSESSIVE


def _class(tag: str) -> str | None:
    """The word class a conjunct is a run of: nominal words, numerals (``2025年``) or time
    words (``去年``); None for any other word."""
    if tag.startswith(_NOMINAL_TAGS):
        return "n"
    return tag if tag in ("m", "t") else None


def _run(tagged: list[tuple[str, str, int]], index: int, step: int) -> tuple[int, int] | None:
    """The run of words of one class (that of the word at ``index``) from ``index`` going
    ``step``: its start and end offsets."""
    first = index
    kind = _class(tagged[index][1]) if 0 <= index < len(tagged) else None
    while kind is not None and 0 <= index < len(tagged) and _class(tagged[index][1]) == kind:
        index += step
    last = index - step
    if (last - first) * step < 0:
        return None
    low, high = sorted((first, last))
    word, _tag, at = tagged[high]
    return tagged[low][2], at + len(word)


def _index_at(tagged: list[tuple[str, str, int]], offset: int, *, end: bool = False) -> int:
    for index, (word, _tag, at) in enumerate(tagged):
        if (at + len(word) if end else at) == offset:
            return index
    raise ValueError(offset)


def share(part: Part, passage_terms: Collection[str]) -> float:
    """The share of ``part``'s own terms a passage holding ``passage_terms`` holds."""
    return sum(1 for term in part.terms if term in passage_terms) / len(part.terms)


def covers(part: Part, passage_terms: Collection[str]) -> bool:
    """Whether a passage holding ``passage_terms`` covers ``part``."""
    return share(part, passage_terms) >= COVERED_SHARE


def part_question(question: str, parts: tuple[Part, ...], part: Part) -> str:
    """The question ``part`` asks on its own (see the module docstring)."""
    if part.by == "sentence":
        return part.text
    start, end = parts[0].start, parts[-1].end
    return f"{question[:start]}{part.text}{question[end:]}".strip()
