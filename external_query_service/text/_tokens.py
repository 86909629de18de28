"""Text → index terms for lexical scoring, script by script.

``terms(text)`` folds the text (NFKC, case) and takes its runs of letters and digits, cut
where Han script meets any other, then

- a Han run is segmented by rjieba (jieba's dictionary and HMM, compiled in Rust) in search
  mode: a long word also yields the dictionary words inside it, so ``大结局`` in a question
  still meets ``结局`` in a page and ``口腔溃疡`` meets ``溃疡``;
- every other run goes through the Snowball English stemmer (PyStemmer), so ``released``
  and ``release`` are one term; numbers and words of other alphabets have no English suffix
  and come back whole.

Traditional and simplified Chinese are one script to the index: Han runs are written simplified
(OpenCC's ``t2s``, ``simplified``) before they are cut, so a traditional page answers a
simplified question and back, and jieba's (simplified) dictionary segments both alike.

Punctuation and whitespace are never terms. ``query_terms(text)`` is the same cut for a
question, less the words that only carry its grammar: jieba's part-of-speech tags mark
pronouns, particles, prepositions, conjunctions and modal words (什么, 的, 跟, 和, 吗), the
interrogatives jieba tags otherwise (``INTERROGATIVES``: 多高 "how tall" is an adjective to
it, 多少 a numeral) are dropped by name, and English has a short closed list of the same
classes. Such words rarely occur in the pages
that answer, so a rarity weight would otherwise take them for telling terms.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Sequence
from functools import cache, lru_cache
from typing import TYPE_CHECKING, Final, Protocol, cast

import opencc
import Stemmer

if TYPE_CHECKING:
    from rjieba import Jieba

__all__ = [
    "INTERROGATIVES",
    "SEPARATOR",
    "query_terms",
    "simplified",
    "term_counts",
    "term_counts_all",
    "terms",
]

_HAN_CLASS: Final = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
# Runs of Han characters, and runs of other letters and digits (any script): two scans.
_HAN_RUN = re.compile(f"[{_HAN_CLASS}]+")
_OTHER_RUN = re.compile(f"[^\\W_{_HAN_CLASS}]+")
_COMPATIBILITY = re.compile("[\uf900-\ufaff]")
#: What joins texts that are cut or folded together (``term_counts_all``, ``echo.fold_all``):
#: a control character, which a page's normalized text never holds and no step here changes.
SEPARATOR: Final = "\x01"
#: How many recent questions' cuts ``query_terms`` keeps, of questions up to
#: ``_KEPT_QUERY_CHARS`` long (a few hundred kilobytes at most for all of them).
_QUERIES_KEPT: Final = 64
_KEPT_QUERY_CHARS: Final = 1_000

#: jieba (ICTCLAS) tag initials of words that only carry a question's grammar: pronouns (r),
#: particles (u), prepositions (p), conjunctions (c), modal particles (y), interjections (e),
#: onomatopoeia (o). Nouns, verbs, adjectives, numbers and names stay.
_FUNCTION_TAGS: Final = frozenset("rupcyeo")
#: Chinese interrogative words: pronouns and adverbs (什么, 哪里, 怎么, 为什么), the degree
#: questions "多 + a measure adjective" (多高 "how tall", 多久 "how long") and the yes-no
#: particle 吗. A closed word class: a question is built from them and the passage answering
#: it holds the measure or the name instead. jieba tags most of them as pronouns, but the
#: degree questions as adjectives or numerals, so ``query_terms`` drops them by this list
#: too; ``echo`` takes a clause holding one for a question.
INTERROGATIVES: Final = frozenset(
    {
        "什么",
        "为什么",
        "为何",
        "怎么",
        "怎样",
        "怎么样",
        "如何",
        "哪里",
        "哪儿",
        "哪个",
        "哪些",
        "哪种",
        "哪家",
        "多少",
        "多久",
        "多高",
        "多大",
        "多长",
        "多远",
        "多深",
        "多厚",
        "几",
        "吗",
    }
)
#: The English counterparts, as stems: interrogatives, auxiliaries, articles, pronouns,
#: prepositions and conjunctions that questions are built from. Closed word classes, so a
#: short list is complete in practice; content words are never on it.
# fmt: off
_FUNCTION_STEMS: Final = frozenset({
    "what", "when", "where", "which", "who", "whom", "whose", "whi", "how",
    "is", "are", "was", "were", "be", "been", "do", "doe", "did", "has", "have", "had",
    "can", "could", "will", "would", "should", "shall", "might", "must",
    "a", "an", "the", "this", "these", "those", "there", "that", "it",
    "of", "to", "in", "on", "at", "for", "from", "by", "with", "about", "as",
    "and", "or", "but", "if", "than",
    "i", "me", "my", "we", "our", "you", "your", "he", "him", "his", "she", "her",
    "they", "them", "their", "pleas",
})
# fmt: on


@cache
def _jieba() -> Jieba:
    # Importing rjieba loads its dictionary (about 0.13 s): pay that when text is first cut,
    # not whenever the package is imported (``--help``, settings checks, the MCP handshake).
    import rjieba

    return rjieba._DEFAULT_JIEBA  # the instance behind rjieba's module-level functions


class _Converter(Protocol):
    def convert(self, text: str) -> str: ...


@cache
def _t2s() -> _Converter:
    # Building the converter loads OpenCC's dictionaries; do it once, on first use.
    return cast(_Converter, opencc.OpenCC("t2s"))


def simplified(text: str) -> str:
    """``text`` with traditional Chinese written simplified (OpenCC ``t2s``: phrases, then
    characters); every other character, and the length of the text, as they were. ASCII text
    is returned without a conversion."""
    return text if text.isascii() else _t2s().convert(text)


@cache
def _stemmer() -> Stemmer.Stemmer:
    return Stemmer.Stemmer("english")


def _runs(text: str) -> tuple[list[str], list[str]]:
    """The Han runs (written simplified) and the other runs of ``text``, NFKC- and
    case-folded.

    NFKC is applied to the runs, not the text: a page's full-width punctuation is no term, and
    folding it away costs a fifth of the cutting. Han runs need it only for compatibility
    ideographs.
    """
    if text.isascii():
        return [], _OTHER_RUN.findall(text.lower())
    folded = text.casefold()
    han = _HAN_RUN.findall(folded)
    if han and _COMPATIBILITY.search(folded):
        han = _HAN_RUN.findall(unicodedata.normalize("NFKC", " ".join(han)))
    if han:
        han = simplified(" ".join(han)).split(" ")
    others = _OTHER_RUN.findall(folded)
    joined = " ".join(others)
    if not joined.isascii():
        others = _OTHER_RUN.findall(unicodedata.normalize("NFKC", joined).casefold())
    return han, others


#: What ``echo.fold`` folds otherwise than case and ``simplified``: full-width letters and
#: digits and compatibility ideographs (NFKC), and characters beyond the BMP, which OpenCC
#: may write for a Han character or read as one (its dictionaries hold no other non-Han
#: characters, and none changes a text's length). A text and its fold without any of them
#: have the same Han runs, each written simplified: OpenCC's phrases never span a run.
_FOLDED_OTHERWISE = re.compile(
    "[\uff10-\uff19\uff21-\uff3a\uff41-\uff5a\uf900-\ufaff\U00010000-\U0010ffff]"
)


def _folded_runs(text: str, folded: str) -> tuple[list[str], list[str]]:
    """``_runs(text)`` read off ``folded`` (``text`` as ``echo.fold`` folds it) where that
    gives the same runs (``_FOLDED_OTHERWISE``): no second case fold and conversion."""
    if text.isascii() or _FOLDED_OTHERWISE.search(text) or _FOLDED_OTHERWISE.search(folded):
        return _runs(text)
    return _runs_of_folded(folded)


def _runs_of_folded(folded: str) -> tuple[list[str], list[str]]:
    # ``_folded_runs`` once its test has passed.
    others = _OTHER_RUN.findall(folded)
    joined = " ".join(others)
    if not joined.isascii():
        others = _OTHER_RUN.findall(unicodedata.normalize("NFKC", joined).casefold())
    return _HAN_RUN.findall(folded), others


def _stems(words: list[str]) -> list[str]:
    # One call for all words: the stemmer's per-call cost dominates single words. Words with
    # no English suffix (numbers, other alphabets) come back as they are.
    return list(_stemmer().stemWords(words)) if words else []


def terms(text: str) -> list[str]:
    """The index terms of ``text``, repeats kept; their order carries no meaning."""
    han, others = _runs(text)
    out = _stems(others)
    if han:
        # One call for the whole text: the separating space is never part of a word (a
        # filter with a bound method stays in C, word by word).
        out.extend(filter(" ".__ne__, _jieba().cut_for_search(" ".join(han))))
    return out


def term_counts(text: str, folded: str | None = None) -> Counter[str]:
    """``Counter(terms(text))``, keys in the same order, counted without the list: the
    separators of jieba's one call are counted with the words and taken out after (a filter
    over every word of a page's chunks was a tenth of cutting them). ``folded``: ``text`` as
    ``echo.fold`` folds it, made already; the runs are read off it where they are the same."""
    return _counted(*(_runs(text) if folded is None else _folded_runs(text, folded)))


def term_counts_all(texts: Sequence[str], folds: Sequence[str]) -> list[Counter[str]]:
    """``[term_counts(text, folded) for text, folded in zip(texts, folds)]``, with the test
    of which runs the folds give (``_FOLDED_OTHERWISE``) made once over all the texts: a
    page's chunks, of which next to none holds such a character. A class of single characters
    is found in the joined texts exactly where it is in one of them."""
    if len(texts) != len(folds):
        raise ValueError("texts and folds differ in number")
    if _FOLDED_OTHERWISE.search(SEPARATOR.join(texts)) or _FOLDED_OTHERWISE.search(
        SEPARATOR.join(folds)
    ):
        return [term_counts(text, folded) for text, folded in zip(texts, folds, strict=True)]
    return [_counted(*_runs_of_folded(folded)) for folded in folds]


def _counted(han: list[str], others: list[str]) -> Counter[str]:
    counts = Counter(_stems(others))
    if han:
        counts.update(_jieba().cut_for_search(" ".join(han)))
        # The runs joined by single spaces (``terms``): no word holds one.
        counts.pop(" ", None)
    return counts


def query_terms(text: str) -> list[str]:
    """``terms(text)`` without a question's function words (see the module docstring)."""
    # The extraction, the scoring and the ranker of every page of a question cut the same
    # question: cut once (part-of-speech tagging is most of it), for a few recent questions.
    if len(text) > _KEPT_QUERY_CHARS:
        return list(_cut_query(text))
    return list(_kept_query_terms(text))


def _cut_query(text: str) -> tuple[str, ...]:
    han, others = _runs(text)
    out = [stem for stem in _stems(others) if stem not in _FUNCTION_STEMS]
    for run in han:
        for word, tag in _jieba().tag(run):
            if tag[:1] not in _FUNCTION_TAGS:
                out.extend(w for w in _jieba().cut_for_search(word) if w not in INTERROGATIVES)
    return tuple(out)


_kept_query_terms = lru_cache(maxsize=_QUERIES_KEPT)(_cut_query)
