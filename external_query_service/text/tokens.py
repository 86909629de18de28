"""Text → index terms for lexical scoring, script by script.

``terms(text)`` folds the text (NFKC, case) and cuts every run of letters and digits where the
script changes, then

- a Han run is segmented by rjieba (jieba's dictionary and HMM, compiled in Rust) in search
  mode: a long word also yields the dictionary words inside it, so ``大结局`` in a question
  still meets ``结局`` in a page and ``口腔溃疡`` meets ``溃疡``;
- a Latin run is stemmed by the Snowball English stemmer (PyStemmer), so ``released`` and
  ``release`` are one term;
- anything else (digits, kana, hangul, other alphabets) is kept whole.

Punctuation and whitespace are never terms. ``query_terms(text)`` is the same cut for a
question, less the words that only carry its grammar: jieba's part-of-speech tags mark
pronouns, particles, prepositions, conjunctions and modal words (什么, 的, 跟, 和, 吗), and
English has a short closed list of the same classes. Such words rarely occur in the pages
that answer, so a rarity weight would otherwise take them for telling terms.
"""

from __future__ import annotations

import re
import unicodedata
from functools import cache
from typing import Final

import rjieba
import Stemmer

__all__ = ["query_terms", "terms"]

_HAN_CLASS: Final = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
# A run of letters or digits in any script, then the same run cut where Han meets the rest.
_WORD = re.compile(r"[^\W_]+")
_SCRIPT_RUN = re.compile(f"[{_HAN_CLASS}]+|[^{_HAN_CLASS}]+")
_LATIN = re.compile(r"[a-z\u00df-\u024f]+")

#: jieba (ICTCLAS) tag initials of words that only carry a question's grammar: pronouns (r),
#: particles (u), prepositions (p), conjunctions (c), modal particles (y), interjections (e),
#: onomatopoeia (o). Nouns, verbs, adjectives, numbers and names stay.
_FUNCTION_TAGS: Final = frozenset("rupcyeo")
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
def _stemmer() -> Stemmer.Stemmer:
    return Stemmer.Stemmer("english")


def _runs(text: str) -> list[str]:
    folded = unicodedata.normalize("NFKC", text).casefold()
    return [run for word in _WORD.findall(folded) for run in _SCRIPT_RUN.findall(word)]


def _is_han(run: str) -> bool:
    return "\u3400" <= run[0] <= "\u9fff" or "\uf900" <= run[0] <= "\ufaff"


def _latin_stems(words: list[str]) -> list[str]:
    return list(_stemmer().stemWords(words)) if words else []


def terms(text: str) -> list[str]:
    """The index terms of ``text`` in order (repeats kept)."""
    out: list[str] = []
    latin: list[int] = []  # positions in ``out`` still holding an unstemmed Latin word
    for run in _runs(text):
        if _is_han(run):
            out.extend(rjieba.cut_for_search(run))
        else:
            if _LATIN.fullmatch(run):
                latin.append(len(out))
            out.append(run)
    # One call for all Latin words: the stemmer's per-call cost dominates single words.
    for index, stem in zip(latin, _latin_stems([out[i] for i in latin]), strict=True):
        out[index] = stem
    return out


def query_terms(text: str) -> list[str]:
    """``terms(text)`` without a question's function words (see the module docstring)."""
    out: list[str] = []
    for run in _runs(text):
        if _is_han(run):
            for word, tag in rjieba.tag(run):
                if tag[:1] not in _FUNCTION_TAGS:
                    out.extend(rjieba.cut_for_search(word))
        elif _LATIN.fullmatch(run):
            stem = _latin_stems([run])[0]
            if stem not in _FUNCTION_STEMS:
                out.append(stem)
        else:
            out.append(run)
    return out
