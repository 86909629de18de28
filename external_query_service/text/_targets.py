"""Does a text talk about a plan target? Generic normalization plus fuzzy containment.

``normalize_for_match`` folds the differences that do not change a name: Unicode
compatibility forms and width (NFKC), case, traditional vs simplified characters (OpenCC's
``t2s``) and whitespace. ``matches_target`` then scores how well the target is contained in
the text, 0..100: `湛江` is found in `湛江市今天多云` because it is a substring, `江门市` is not
because the best-aligned window shares one character.

A place is named with or without the word for its kind of administrative division (`湛江市`
and `湛江`, `广东省` and `广东`, "Zhanjiang City" and "Zhanjiang"), so a target is also
matched without such a suffix (``target_forms``): the suffixes are a short closed list of
generic words for divisions (市, 省, 区, 县, 自治区, 特别行政区 …; City, Province, County …),
never a list of places, and one is dropped only when a name of two or more characters (or a
whole word, in alphabetic scripts) is left.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from typing import Final

from rapidfuzz import fuzz

from ._tokens import simplified

__all__ = [
    "MATCH_THRESHOLD",
    "best_match",
    "matches_target",
    "mentions_target",
    "normalize_for_match",
    "target_forms",
]

#: Lowest score that counts as a match. One wrong character in a two- or three-character name
#: scores about 67, so names that merely share a character (`江门` / `湛江`) stay apart, while a
#: name of seven or more characters may differ in one character and still match.
MATCH_THRESHOLD = 85


#: Words for a kind of administrative division that a place's name may carry or leave out,
#: longest first (simplified script: names are compared after ``t2s``).
_HAN_DIVISIONS: Final = (
    "特别行政区",
    "自治区",
    "自治州",
    "自治县",
    "自治旗",
    "地区",
    "省",
    "市",
    "区",
    "县",
)
#: The same in alphabetic scripts, dropped only as a whole last word.
# The lookbehind lets a match start only where a run of spaces starts, so a long run is
# scanned once, not once per space.
_WORD_DIVISION = re.compile(
    r"(?<!\s)\s+(?:city|province|county|district|prefecture|municipality|region|shi|sheng|xian)$"
)
#: A Han name keeps at least this many characters once its suffix is dropped: `北区` stays.
_MIN_HAN_STEM = 2


def _folded(text: str) -> str:
    return simplified(unicodedata.normalize("NFKC", text).casefold()).strip()


def normalize_for_match(text: str) -> str:
    """NFKC, casefold, traditional → simplified, all whitespace removed."""
    return "".join(_folded(text).split())


def target_forms(target: str) -> tuple[str, ...]:
    """The normalized spellings a text may use for ``target``: ``normalize_for_match(target)``
    and, when the name ends in an administrative-division word, the name without it
    (module docstring). Empty for an empty target."""
    folded = _folded(target)
    whole = "".join(folded.split())
    if not whole:
        return ()
    stem = _WORD_DIVISION.sub("", folded)
    if stem == folded:
        for suffix in _HAN_DIVISIONS:
            if whole.endswith(suffix) and len(whole) - len(suffix) >= _MIN_HAN_STEM:
                stem = whole[: -len(suffix)]
                break
    stem = "".join(stem.split())
    return (whole, stem) if stem and stem != whole else (whole,)


def matches_target(target: str, text: str) -> int:
    """Score 0..100: 100 when a form of the target (``target_forms``) is inside the
    normalized text.

    Otherwise rapidfuzz's ``partial_ratio`` (the best alignment of the shorter string inside
    the longer one) of its best form, floored to an integer. An empty side scores 0.
    """
    forms = target_forms(target)
    text_norm = normalize_for_match(text)
    if not forms or not text_norm:
        return 0
    if any(form in text_norm for form in forms):
        return 100
    return max(int(fuzz.partial_ratio(form, text_norm)) for form in forms)


def best_match(target: str, texts: Iterable[str]) -> int:
    """The highest ``matches_target`` score over several texts (0 when there are none).

    Texts are scored one by one rather than joined, so that a short name (an alias) can still
    cover a longer target on its own.
    """
    return max((matches_target(target, text) for text in texts), default=0)


def mentions_target(target: str, texts: Iterable[str]) -> bool:
    """True when any of ``texts`` matches ``target`` at or above ``MATCH_THRESHOLD``."""
    return best_match(target, texts) >= MATCH_THRESHOLD
