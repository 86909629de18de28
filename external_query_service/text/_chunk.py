"""Text → chunks: paragraph- and sentence-aware spans that snippets point into.

Every chunk is an exact slice of the text it came from (``text[offset:offset + length]``),
chunks come in order and never overlap, and none starts or ends with whitespace.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

__all__ = ["NAV_LINE_CHARS", "Chunk", "chunk_text", "navigation_line"]

# A sentence ends after a run of CJK or Latin terminators (plus any closing quotes or
# brackets), or after a Latin full stop followed by whitespace. No nested quantifiers: linear.
_SENTENCE_END = re.compile(r"(?:[。！？；!?;]+|\.(?=\s))[\"'”’」』）)\]】]*")
_LINE = re.compile(r"[^\n]+")
# Where a sentence that is too long may be cut when it must be: after a comma-like mark.
_SOFT_BREAKS: Final = frozenset("，、,：:")
#: A line this short with no sentence or clause mark reads as a menu item or a link's text.
NAV_LINE_CHARS: Final = 16
# What prose has and a menu item lacks: sentence and clause marks.
_PROSE_MARKS: Final = frozenset("。！？；!?;，,、：:")


def navigation_line(line: str) -> bool:
    """True for a line that reads as navigation: a menu item, a link's text, a breadcrumb
    (at most ``NAV_LINE_CHARS`` characters without any sentence or clause mark, or items
    joined by ``>``/``»``/``|``)."""
    text = line.strip()
    if not text:
        return False
    if sum(text.count(mark) for mark in ">»|") >= 2:
        return True
    return len(text) <= NAV_LINE_CHARS and not _PROSE_MARKS.intersection(text)


@dataclass(frozen=True)
class Chunk:
    """``length`` characters of the source text starting at ``offset``; ``text`` is that slice."""

    offset: int
    length: int
    text: str


def chunk_text(
    text: str,
    *,
    max_chars: int = 360,
    min_chars: int | None = None,
    skip_line: Callable[[str], bool] | None = None,
) -> tuple[Chunk, ...]:
    """Split ``text`` into chunks of at most ``max_chars`` characters.

    Paragraphs (lines) are kept whole when they fit, and consecutive ones are merged while the
    merged span fits. A paragraph that does not fit is split at sentence ends (。！？；!?; and
    ". "), and its sentences are packed the same way. A chunk shorter than ``min_chars``
    (default ``max_chars // 3``) — a heading, a page title, a one-line question — takes the
    next paragraph's leading sentences rather than stand alone, so a snippet reads as a
    passage. Chunks end at sentence ends; only a single sentence longer than ``max_chars`` is
    cut, preferably after a comma or at a space.

    Lines for which ``skip_line`` (given the stripped line) is true — navigation, a page's
    link texts — belong to no chunk, and no chunk spans across them: they never lead or
    fill an excerpt. Without ``skip_line`` the chunks cover every non-blank character.
    """
    if max_chars < 1:
        raise ValueError("max_chars must be positive")
    short = max_chars // 3 if min_chars is None else min_chars
    packed: list[tuple[int, int]] = []

    fresh = False  # a skipped line came since the last chunk: start a new one

    def add(start: int, end: int) -> None:
        nonlocal fresh
        if packed and not fresh and end - packed[-1][0] <= max_chars:
            packed[-1] = (packed[-1][0], end)
        else:
            packed.append((start, end))
        fresh = False

    for line in _LINE.finditer(text):
        span = _strip(text, line.start(), line.end())
        if span is None:
            continue
        start, end = span
        if skip_line is not None and skip_line(text[start:end]):
            fresh = bool(packed)
            continue
        fits_alone = end - start <= max_chars
        if fits_alone and (
            not packed
            or fresh
            or end - packed[-1][0] <= max_chars
            or packed[-1][1] - packed[-1][0] >= short
        ):
            add(start, end)
            continue
        for sentence_start, sentence_end in _sentences(text, start, end):
            if sentence_end - sentence_start <= max_chars:
                add(sentence_start, sentence_end)
            else:
                for piece in _hard_split(text, sentence_start, sentence_end, max_chars):
                    add(*piece)
    return tuple(Chunk(start, end - start, text[start:end]) for start, end in packed)


def _strip(text: str, start: int, end: int) -> tuple[int, int] | None:
    """The span without leading and trailing whitespace, or None when nothing is left."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return (start, end) if start < end else None


def _sentences(text: str, start: int, end: int) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    cursor = start
    for match in _SENTENCE_END.finditer(text, start, end):
        span = _strip(text, cursor, match.end())
        if span is not None:
            spans.append(span)
        cursor = match.end()
    tail = _strip(text, cursor, end)
    if tail is not None:
        spans.append(tail)
    return spans


def _hard_split(text: str, start: int, end: int, max_chars: int) -> list[tuple[int, int]]:
    pieces: list[tuple[int, int]] = []
    while end - start > max_chars:
        limit = start + max_chars
        cut = limit
        # Look back over the second half of the window for a comma or a space.
        for index in range(limit - 1, start + max_chars // 2 - 1, -1):
            char = text[index]
            if char in _SOFT_BREAKS:
                cut = index + 1
                break
            if char.isspace():
                cut = index
                break
        span = _strip(text, start, cut)
        if span is not None:
            pieces.append(span)
        rest = _strip(text, cut, end)
        if rest is None:
            return pieces
        start = rest[0]
    pieces.append((start, end))
    return pieces
