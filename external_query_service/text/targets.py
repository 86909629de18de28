"""Does a text talk about a plan target? Generic normalization plus fuzzy containment.

``normalize_for_match`` folds the differences that do not change a name: Unicode
compatibility forms and width (NFKC), case, traditional vs simplified characters (OpenCC's
``t2s`` character table) and whitespace. ``matches_target`` then scores how well the target is
contained in the text, 0..100. There are no suffix, entity or keyword lists here: `湛江` is
found in `湛江市今天多云` because it is a substring, `江门市` is not because the best-aligned
window shares one character, and a short provider name (`湛江`) covers a longer plan target
(`湛江市`) because ``partial_ratio`` aligns the shorter string inside the longer one.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from functools import cache
from typing import Protocol, cast

import opencc
from rapidfuzz import fuzz

__all__ = [
    "MATCH_THRESHOLD",
    "best_match",
    "matches_target",
    "mentions_target",
    "normalize_for_match",
]

#: Lowest score that counts as a match. One wrong character in a two- or three-character name
#: scores about 67, so names that merely share a character (`江门` / `湛江`) stay apart, while a
#: name of seven or more characters may differ in one character and still match.
MATCH_THRESHOLD = 85


class _Converter(Protocol):
    def convert(self, text: str) -> str: ...


@cache
def _t2s() -> _Converter:
    # Building the converter loads OpenCC's dictionaries; do it once, on first use.
    return cast(_Converter, opencc.OpenCC("t2s"))


def normalize_for_match(text: str) -> str:
    """NFKC, casefold, traditional → simplified, all whitespace removed."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    simplified = _t2s().convert(folded)
    return "".join(simplified.split())


def matches_target(target: str, text: str) -> int:
    """Score 0..100: 100 when the normalized target is inside the normalized text.

    Otherwise rapidfuzz's ``partial_ratio`` (the best alignment of the shorter string inside
    the longer one), floored to an integer. An empty side scores 0.
    """
    target_norm = normalize_for_match(target)
    text_norm = normalize_for_match(text)
    if not target_norm or not text_norm:
        return 0
    if target_norm in text_norm:
        return 100
    return int(fuzz.partial_ratio(target_norm, text_norm))


def best_match(target: str, texts: Iterable[str]) -> int:
    """The highest ``matches_target`` score over several texts (0 when there are none).

    Texts are scored one by one rather than joined, so that a short name (an alias) can still
    cover a longer target on its own.
    """
    return max((matches_target(target, text) for text in texts), default=0)


def mentions_target(target: str, texts: Iterable[str]) -> bool:
    """True when any of ``texts`` matches ``target`` at or above ``MATCH_THRESHOLD``."""
    return best_match(target, texts) >= MATCH_THRESHOLD
