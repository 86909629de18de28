"""What each source says the answer is, for any question: the value a passage gives where
passages of other sources word the same statement around it.

Each passage is read as words: each CJK character a word, each run of other letters or
digits a word, and each other character but a space a word of its own (punctuation is where
a statement ends). For two passages of different sites, a *slot* is where they run alike for
``CONTEXT_WORDS`` words, then differ, then run alike again for ``CONTEXT_WORDS`` words
within ``MAX_VALUE_WORDS`` words on each side. The shared words are ones each passage writes
once (anchors, as a patience diff takes them), and a passage's start and end count as words,
so two that run alike to their end share it (an edge alone is no anchor: it is where a
passage was cut, maybe inside a word). This is a diff of the two read locally, so it finds
the slot in a near-copy and in two passages written apart that word the statement alike
(``共有…个座位``). The shared words before and after say what the value is *of*; the words
between are the value each passage gives. A value cut inside a number or a date is widened
to the whole of it (``1.2万`` and ``1.5万`` differ in one digit); a number or date with
other words beside it between the shared words is no value (the passages differ in more
than the value: they make another statement).

The two values of a slot are compared only when they are of one type:

- a **date** each (an explicit calendar date, ``text._dates``, other than the page's own
  publication date, which says when it was written): different days disagree;
- a **number** each (``text._quantities``, in the same unit, a unit written two ways being
  one unit): they agree when they differ by at most half the last place the coarser one is
  written to (``2.3亿`` and ``230,400,000`` agree; ``1949`` and ``1950`` do not);
- a **name** each (no digit, nothing that ends a clause, at most ``MAX_NAME_CHARS``
  characters): two names disagree unless equal after NFKC and case folding.

Only a slot about what is asked counts: the shared words hold a word of letters (or the
passage's edge) on each side, not digits and marks alone (a dateline's ``-11-20``); the
words within ``WINDOW_WORDS`` of it (in the passage it was found in) hold at least
``ASKED_TERMS`` of the question's index terms (``text._tokens.query_terms``: its words less
those that only carry its grammar); and neither value is written in the question (what is
asked is not in the question). A slot elsewhere, say two copies of an article differing in
a figure far from the question's words, is left alone. Nothing here reads the plan's kind
or a list of words. The constants were chosen on the fitting halves of
``bench/evidence_agreement.py``.

Pure: no I/O.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Literal

from ..models import Evidence
from ..net._sites import registrable_domain, url_host
from ..text._dates import date_spans
from ..text._quantities import find_quantities
from ..text._tokens import query_terms, terms

__all__ = [
    "ASKED_TERMS",
    "CONTEXT_WORDS",
    "MAX_NAME_CHARS",
    "MAX_VALUE_WORDS",
    "WINDOW_WORDS",
    "Reading",
    "agree",
    "differ_in_value",
    "slot_readings",
]

#: Words two passages must share on each side of a slot.
CONTEXT_WORDS = 4
#: At most this many words of each passage between the shared words.
MAX_VALUE_WORDS = 16
#: A name longer than this many characters is a phrase, not a value.
MAX_NAME_CHARS = 40
#: How far from the slot the question's terms are looked for, in words each side.
WINDOW_WORDS = 12
#: How many of the question's distinct terms must be that near the slot.
ASKED_TERMS = 1

_CJK_CLASS = "\u3400-\u9fff\uf900-\ufaff"
_WORD = re.compile(f"[{_CJK_CLASS}]|[^\\W_{_CJK_CLASS}]+|[^\\s\\w]|_")
#: Where a clause ends: a name holds none of these (brackets, quotation marks, the
#: enumeration comma and the separators inside names, ``马克·吐温``, may be in one).
_CLAUSE_ENDS = frozenset("。！？；，,;!?\n")

#: The passage's edges, as words: two passages that run alike to their end (or from their
#: start) share that edge, so a value last (or first) in both still has words around it.
_START, _END = "\x02", "\x03"

Kind = Literal["number", "date", "name"]


@dataclass(frozen=True, slots=True)
class Reading:
    """What one passage gives at one slot: ``text`` as written; for a number its
    ``value`` and ``unit`` and ``place`` (the last place it is written to, 0 when exact);
    for a date its day's ordinal as ``value``; for a name its folded spelling as ``key``."""

    evidence: Evidence
    slot: str
    kind: Kind
    text: str
    value: Decimal = Decimal(0)
    unit: str = ""
    place: Decimal = Decimal(0)
    key: str = ""


@dataclass(slots=True)
class _Passage:
    evidence: Evidence
    text: str
    words: list[str] = field(default_factory=list)
    spans: list[tuple[int, int]] = field(default_factory=list)
    grams: dict[tuple[str, ...], list[int]] = field(default_factory=dict)


def _passage(evidence: Evidence) -> _Passage:
    text = unicodedata.normalize("NFKC", evidence.snippet)
    # Each edge is as many words as an anchor holds, so a value one word from it still has
    # a whole anchor on that side.
    passage = _Passage(evidence, text, [_START] * CONTEXT_WORDS, [(0, 0)] * CONTEXT_WORDS)
    for match in _WORD.finditer(text):
        passage.words.append(match.group().casefold())
        passage.spans.append(match.span())
    passage.words.extend([_END] * CONTEXT_WORDS)
    passage.spans.extend([(len(text), len(text))] * CONTEXT_WORDS)
    words = passage.words
    for end in range(CONTEXT_WORDS, len(words) + 1):
        passage.grams.setdefault(tuple(words[end - CONTEXT_WORDS : end]), []).append(end)
    return passage


def _question_terms(question: str) -> frozenset[str]:
    return frozenset(query_terms(question))


def _fold(text: str) -> str:
    return "".join(unicodedata.normalize("NFKC", text).casefold().split())


def _site(evidence: Evidence) -> str:
    return registrable_domain(url_host(evidence.url))


SlotKey = tuple[tuple[str, ...], tuple[str, ...]]


def _slots(left: _Passage, right: _Passage) -> Iterator[tuple[SlotKey, int, int]]:
    """Each slot of the two passages: its key (the shared words before and after) and where
    its value starts and ends in ``left`` (word indexes)."""
    a, b = left.words, right.words
    for i in range(CONTEXT_WORDS, len(a)):
        before = tuple(a[i - CONTEXT_WORDS : i])
        ends = right.grams.get(before, ())
        if len(ends) != 1 or len(left.grams[before]) != 1:
            continue  # anchors are words each passage writes once, as a patience diff's
        (j,) = ends
        if j < len(b) and a[i] == b[j]:
            continue  # still running alike
        found = _after(a, i, left, right, j)
        if found is not None:
            k, after = found
            yield (before, after), i, i + k


def _after(
    a: list[str], i: int, left: _Passage, right: _Passage, j: int
) -> tuple[int, tuple[str, ...]] | None:
    """The nearest place past ``a[i]`` and ``b[j]`` where both run alike again (on words
    each writes once): the words of ``a`` skipped and the shared words."""
    best: tuple[int, int, tuple[str, ...]] | None = None
    for k in range(MAX_VALUE_WORDS + 1):
        if i + k + CONTEXT_WORDS > len(a):
            break
        gram = tuple(a[i + k : i + k + CONTEXT_WORDS])
        ends = right.grams.get(gram, ())
        if len(ends) != 1 or len(left.grams[gram]) != 1:
            continue
        skipped = ends[0] - CONTEXT_WORDS - j
        if (
            0 <= skipped <= MAX_VALUE_WORDS
            and (k or skipped)
            and (best is None or k + skipped < best[0])
        ):
            best = (k + skipped, k, gram)
    return None if best is None else (best[1], best[2])


def _value_at(passage: _Passage, key: SlotKey) -> tuple[int, int] | None:
    """Where the passage's value for the slot ``key`` starts and ends (word indexes): where
    its words before the slot are followed, within ``MAX_VALUE_WORDS``, by its words after,
    each written once in it."""
    before, after = key
    words = passage.words
    starts = passage.grams.get(before, ())
    if len(starts) != 1 or len(passage.grams.get(after, ())) != 1:
        return None  # an anchor written twice: which place is meant is not known
    (start,) = starts
    for k in range(MAX_VALUE_WORDS + 1):
        end = start + k
        if tuple(words[end : end + CONTEXT_WORDS]) == after:
            return start, end
    return None


def _read(passage: _Passage, start: int, end: int, slot: str) -> Reading | None:
    """The value between word ``start`` and ``end``, widened to a number or date it cuts."""
    if start >= end:
        return None
    low, high = passage.spans[start][0], passage.spans[end - 1][1]
    text = passage.text
    reference = passage.evidence.published_at
    for day_start, day_end, day in date_spans(text, reference=reference):
        if day_start < high and low < day_end:
            outside = text[low:day_start] + text[day_end:high]
            if _has_digit(outside) or _has_letter(outside):
                return None  # the passages differ in more than the date: another statement
            if day == reference:
                return None  # the page's own dateline: when it was written, not a value
            return Reading(
                passage.evidence, slot, "date", text[day_start:day_end], Decimal(day.toordinal())
            )
    numbers = [q for q in find_quantities(text) if q.start < high and low < q.end]
    if len(numbers) == 1:
        (number,) = numbers
        if _has_letter(text[low : number.start] + text[number.end : high]):
            return None  # the passages differ in more than the number: another statement
        written = text[min(low, number.start) : max(high, number.end)]
        return Reading(
            passage.evidence,
            slot,
            "number",
            written,
            number.value,
            number.unit,
            _place(text[number.start : number.end], number.value),
        )
    if numbers or _has_digit(text[low:high]):
        return None
    name = text[low:high].strip()
    if not name or len(name) > MAX_NAME_CHARS:
        return None
    if any(char in _CLAUSE_ENDS for char in name):
        return None  # a clause or more: a statement, not a name
    return Reading(passage.evidence, slot, "name", name, key=_fold(name))


_ARABIC = re.compile(r"\d[\d,]{0,30}(?:\.\d{1,12})?")


def _place(written: str, value: Decimal) -> Decimal:
    """The last place ``written`` gives ``value`` to (``2.3亿``: 10,000,000); 0 for a
    number written in Chinese numerals, which is exact."""
    digits = _ARABIC.search(written)
    if digits is None:
        return Decimal(0)
    shown = Decimal(digits.group().replace(",", ""))
    if shown == 0:
        return Decimal(0)
    exponent = shown.as_tuple().exponent
    assert isinstance(exponent, int)  # a finite decimal
    return abs(value / shown) * Decimal(1).scaleb(exponent)


def _has_digit(text: str) -> bool:
    return any(char.isdigit() for char in text)


def _has_letter(text: str) -> bool:
    return any(char.isalpha() for char in text)


def agree(left: Reading, right: Reading) -> bool:
    """Whether two readings of one slot say the same (the rules in the module docstring);
    readings of different types, or numbers in different units, are never compared, and
    so agree."""
    if left.kind != right.kind:
        return True
    if left.kind == "name":
        return left.key == right.key
    if left.kind == "date":
        return left.value == right.value
    if left.unit != right.unit:
        return True
    return abs(left.value - right.value) <= max(left.place, right.place) / 2


def _asked(passage: _Passage, start: int, end: int, asked: frozenset[str]) -> bool:
    spans = passage.spans
    before = passage.text[spans[max(0, start - WINDOW_WORDS)][0] : spans[start][0]]
    last = min(len(spans), end + WINDOW_WORDS) - 1
    after = passage.text[spans[end][0] : spans[last][1]] if end < len(spans) else ""
    found = (set(terms(before)) | set(terms(after))) & asked
    return len(found) >= ASKED_TERMS


def _worded(key: SlotKey) -> bool:
    """Whether the shared words hold a word of letters (or the passage's edge) on each
    side, and a word of the text: digits and marks alone (a dateline's ``-11-20``) say
    nothing of what the value is of, and an edge alone is where a passage was cut, maybe
    inside a word."""
    edges = (_START, _END)
    return all(
        any(word not in edges for word in side)
        and any(word[0].isalpha() or word in edges for word in side)
        for side in key
    )


def _slot_name(key: SlotKey) -> str:
    before, after = key
    return f"{_joined(before)}…{_joined(after)}"


def _joined(words: Sequence[str]) -> str:
    text = ""
    for word in words:
        if word in (_START, _END):
            continue
        if text and text[-1].isascii() and text[-1].isalnum() and word[0].isascii():
            text += " "
        text += word
    return text


def slot_readings(question: str, ranked: Sequence[Evidence]) -> tuple[tuple[Reading, ...], ...]:
    """For each slot about what is asked among ``ranked`` (admitted evidence, best first),
    the reading of every passage that has it (first ranked first), where two or more of
    them disagree."""
    passages = [_passage(item) for item in ranked]
    asked = _question_terms(question)
    folded_question = _fold(question)
    keys: dict[SlotKey, None] = {}
    for index, left in enumerate(passages):
        for right in passages[index + 1 :]:
            if _site(left.evidence) == _site(right.evidence):
                continue
            for key, start, end in _slots(left, right):
                if key not in keys and _worded(key) and _asked(left, start, end, asked):
                    keys[key] = None
    found: list[tuple[Reading, ...]] = []
    for key in keys:
        slot = _slot_name(key)
        readings: list[Reading] = []
        for passage in passages:
            at = _value_at(passage, key)
            reading = _read(passage, *at, slot) if at is not None else None
            if reading is not None and _fold(reading.text) not in folded_question:
                readings.append(reading)
        if any(not agree(one, other) for one in readings for other in readings):
            found.append(tuple(readings))
    return tuple(found)


def differ_in_value(question: str, left: Evidence, right: Evidence) -> bool:
    """Whether the two passages give different values at a slot about what is asked: two
    texts alike but for the value asked are two sources that disagree, not one copied."""
    one, other = _passage(left), _passage(right)
    asked = _question_terms(question)
    folded_question = _fold(question)
    for key, start, end in _slots(one, other):
        if not _worded(key) or not _asked(one, start, end, asked):
            continue
        at = _value_at(other, key)
        if at is None:
            continue
        mine = _read(one, start, end, "")
        theirs = _read(other, *at, "")
        if mine is None or theirs is None:
            continue
        if _fold(mine.text) in folded_question or _fold(theirs.text) in folded_question:
            continue
        if not agree(mine, theirs):
            return True
    return False
