"""Where a passage asks rather than answers: the question's terms there carry no answer.

A page that answers a question often asks it too: "那么《兰陵王妃》大结局是什么？" before the
story, a heading "爬爬垫什么材质好", the question copied into the page title. Such spans mention
the query's terms as well as the answer does, so by coverage alone an introduction that
restates the question ties with the passage that answers it. ``question_spans`` finds them:

- a *question sentence*: one ending with a question mark (``?`` or ``？``);
- a *question clause*: a clause holding an interrogative word (``tokens.INTERROGATIVES``: 什么,
  哪里, 怎么, 多少, 吗 …, a closed word class). Clauses end at sentence ends, line breaks,
  commas and the separators of titles and breadcrumbs (``_ | > 【】《》``) — not at a colon,
  which joins a label to its value;
- a *copy*: the question itself, word for word (a page title that is the question).

``answer_terms`` is what is left: the query terms a passage mentions outside those spans —
and outside its *breadcrumb trails* (a line of three or more items joined by ``>`` or ``»``,
"首页 > 娱乐 > 电视剧 > X大结局剧透": navigation that names where the page sits and its title,
telling nothing) — at least as often as inside them. An introduction that asks the question in
two or three sentences and then names its subject once in passing ("一起来看看下文关于X的大结局")
is still asking; a passage that asks once and then tells, repeating the question's words, is
answering. ``score`` gives that answering coverage part of a chunk's score (its module
docstring).

A clause that merely restates the question without asking it (a heading made of the query's
words, outside a breadcrumb trail) is not taken for an echo: such headings as often introduce
the answer right after them. Everything works on the folded text with substring tests and
counts: a few regular-expression scans per passage, no second word segmentation.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence

from ._tokens import INTERROGATIVES, SEPARATOR, simplified

__all__ = ["answer_terms", "breadcrumb_spans", "fold", "fold_all", "question_spans"]

# A sentence: up to and including its terminators (a question when they hold ? or ？).
_SENTENCE = re.compile(r"[^\n。！？；!?;]+[。！？；!?;]*")
# Clause separators inside a sentence: commas, and the separators of titles and breadcrumbs.
_CLAUSE_BREAK = re.compile(r"[，,、_|>»【】《》]| [-–—] ")


def _holding_any(words: Iterable[str]) -> str:
    """A pattern found in a text exactly where one of ``words`` is (which one is not told):
    a word holding another is left out (为什么 holds 什么), and the rest are grouped by their
    first character, so a scan tests one character class per position rather than every word
    (a third of the CPU of the plain alternation on a page's chunks)."""
    words = set(words)
    kept = sorted(w for w in words if not any(other != w and other in w for other in words))
    groups: dict[str, list[str]] = {}
    for word in kept:
        groups.setdefault(word[0], []).append(word[1:])
    parts = []
    for first, rests in groups.items():
        rest = "|".join(map(re.escape, rests))
        parts.append(re.escape(first) + (f"(?:{rest})" if rest else ""))
    return "|".join(parts)


# Not 几 in a passage: "几十万" (several hundred thousand) asks nothing.
_INTERROGATIVE = re.compile(_holding_any(INTERROGATIVES - {"几"}))
_QUESTION_MARKS = frozenset("?？")
# What a copy of the question leaves out: the marks that close it.
_QUESTION_ENDS = " \t\n?？!！。.,，"
# What NFKC changes in a term: full-width letters and digits, compatibility ideographs (the
# full-width punctuation the patterns here list in both widths is left alone: folding it away
# would cost more than the rest of the pass).
_COMPATIBLE = re.compile("[\uff10-\uff19\uff21-\uff3a\uff41-\uff5a\uf900-\ufaff]")
# A breadcrumb trail names at least this many items ("首页 > 新闻 > 标题"; ">>" and "-->" are
# one separator, and "立即前往>>" names one item).
_CRUMB_ITEMS = 3
# Anything that could start a question span (the copy aside): one scan settles most passages.
_ASKS = re.compile(f"[?？]|{_INTERROGATIVE.pattern}")


def fold(text: str) -> str:
    """``text`` NFKC- and case-folded and written simplified, as ``tokens`` folds the words
    it cuts."""
    folded = text.casefold()
    if folded.isascii():
        return folded
    if _COMPATIBLE.search(folded):
        folded = unicodedata.normalize("NFKC", folded).casefold()
    return simplified(folded)


def fold_all(texts: Sequence[str]) -> list[str]:
    """``[fold(text) for text in texts]``, folded as one text where that is the same: a page's
    chunks in one case fold and one conversion instead of one each (the conversion's own cost
    per call was a third of folding a chunk).

    The texts are joined by ``tokens.SEPARATOR``, a control character that no text holds
    (else each is folded alone) and that every step keeps as it is: the case fold maps each
    character alone; OpenCC's phrases are Han and never hold it, so none spans two texts; ASCII
    is never converted. Where a text needs NFKC (``_COMPATIBLE``), each is folded alone."""
    if len(texts) < 2:
        return [fold(text) for text in texts]
    joined = SEPARATOR.join(texts)
    if joined.count(SEPARATOR) != len(texts) - 1:
        return [fold(text) for text in texts]
    folded = joined.casefold()
    if not folded.isascii():
        if _COMPATIBLE.search(folded):
            return [fold(text) for text in texts]
        folded = simplified(folded)
    parts = folded.split(SEPARATOR)
    return parts if len(parts) == len(texts) else [fold(text) for text in texts]


def question_spans(text: str, question: str) -> list[tuple[int, int]]:
    """The ``(start, end)`` spans of ``text`` that ask a question or copy ``question`` (less
    its closing marks; ``""`` for none), in order; they may overlap. Both are compared as
    given: fold them first (``fold``)."""
    spans: list[tuple[int, int]] = []
    question = question.strip(_QUESTION_ENDS)
    if question:
        spans += [match.span() for match in re.finditer(re.escape(question), text)]
    for sentence in _SENTENCE.finditer(text):
        start, end = sentence.span()
        if _QUESTION_MARKS.intersection(sentence.group()):
            spans.append((start, end))
            continue
        if not _INTERROGATIVE.search(text, start, end):
            continue
        cursor = start
        for separator in [*_CLAUSE_BREAK.finditer(text, start, end), None]:
            stop = end if separator is None else separator.start()
            if _INTERROGATIVE.search(text, cursor, stop):
                spans.append((cursor, stop))
            if separator is not None:
                cursor = separator.end()
    spans.sort()
    return spans


def breadcrumb_spans(text: str) -> list[tuple[int, int]]:
    """The ``(start, end)`` spans of the lines of ``text`` that are breadcrumb trails: three
    or more items joined by ``>`` or ``»`` ("首页 > 娱乐 > 电视剧 > 页面标题", "首页>>新闻>>标题"),
    in order."""
    spans: list[tuple[int, int]] = []
    start = 0
    for line in text.split("\n"):
        if ">" in line or "»" in line:
            items = [item for item in line.replace("»", ">").split(">") if item.strip(" -")]
            if len(items) >= _CRUMB_ITEMS:
                spans.append((start, start + len(line)))
        start += len(line) + 1
    return spans


def answer_terms(
    text: str, question: str, query_terms: Iterable[str], *, folded: bool = False
) -> set[str]:
    """The ``query_terms`` that ``text`` mentions outside its ``question_spans`` and
    ``breadcrumb_spans`` at least as often as inside them.

    ``question`` and the terms must be folded already (``fold``, ``tokens.query_terms``); the
    test is a substring test (and count) on the folded text, so a stem matches the words it was
    cut from. ``folded``: ``text`` is folded already (``score.text_terms`` keeps it so).
    """
    folded_text = text if folded else fold(text)
    return _told(folded_text, question, query_terms)


def _told(folded: str, question: str, query_terms: Iterable[str]) -> set[str]:
    question = question.strip(_QUESTION_ENDS)
    crumbs = breadcrumb_spans(folded) if ">" in folded or "»" in folded else []
    if not crumbs and not _ASKS.search(folded) and not (question and question in folded):
        return {term for term in query_terms if term and term in folded}
    pieces: list[str] = []
    cursor = 0
    for start, end in sorted(question_spans(folded, question) + crumbs):
        pieces.append(folded[cursor : max(start, cursor)])
        cursor = max(cursor, end)
    pieces.append(folded[cursor:])
    told = "\n".join(pieces)
    # Mentions outside the spans, at least as many as inside them (all mentions less those).
    return {
        term
        for term in query_terms
        if term and term in told and 2 * told.count(term) >= folded.count(term)
    }
