"""Languages: which one a question is written in, which one an answer is written in, and
what counts as a language tag.

The question's language comes from its *script*, never from its words: the share of its
letters that are Han characters, kana or Hangul, against Latin letters. Tags follow BCP 47
(RFC 5646); only their shape is checked here, the way a search engine or a geocoder will
read them.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Literal

__all__ = [
    "ANSWER_LANGUAGES",
    "AnswerLanguage",
    "LanguageSetting",
    "answer_language",
    "detect_language",
    "is_language_tag",
    "primary_subtag",
]

#: The languages answers are written in; anything else is answered in Chinese.
AnswerLanguage = Literal["zh", "en"]
ANSWER_LANGUAGES: tuple[AnswerLanguage, ...] = ("zh", "en")
#: ``[presenter] language``: follow the plan (``auto``) or always use one language.
LanguageSetting = Literal["auto", "zh", "en"]

#: A question counts as written in a CJK language when at least this share of its letters
#: are CJK: "USD兑人民币汇率" is Chinese, "What is the weather in 湛江?" is English.
_CJK_SHARE = 0.3

# RFC 5646 "langtag". Not accepted: private-use-only and grandfathered tags (no search engine
# or geocoder reads them) and the 4- and 5-8-letter language subtags the grammar reserves but
# the registry has never assigned (so "english" is refused). Subtags: language, extlang,
# script, region, variants, extensions, private use.
_LANGTAG = re.compile(
    r"""
    [a-z]{2,3}(?:-[a-z]{3}){0,3}                            # language (+ extlang)
    (?:-[a-z]{4})?                                          # script
    (?:-(?:[a-z]{2}|[0-9]{3}))?                             # region
    (?:-(?:[a-z0-9]{5,8}|[0-9][a-z0-9]{3}))*                # variants
    (?:-[0-9a-wyz](?:-[a-z0-9]{2,8})+)*                     # extensions
    (?:-x(?:-[a-z0-9]{1,8})+)?                              # private use
    """,
    re.VERBOSE | re.IGNORECASE,
)


def is_language_tag(tag: str) -> bool:
    """True when ``tag`` is a well-formed BCP 47 language tag (``zh``, ``zh-TW``,
    ``zh-Hant-TW``, ``en-GB``); ``und`` (undetermined) included."""
    return len(tag) <= 64 and _LANGTAG.fullmatch(tag) is not None


def primary_subtag(tag: str) -> str:
    """The language subtag in lower case: ``zh`` for ``zh-Hant-TW``."""
    return tag.split("-", 1)[0].lower()


def _script(char: str) -> str | None:
    name = unicodedata.name(char, "")
    if name.startswith(("CJK UNIFIED IDEOGRAPH", "CJK COMPATIBILITY IDEOGRAPH")):
        return "han"
    if name.startswith(("HIRAGANA", "KATAKANA")):
        return "kana"
    if name.startswith("HANGUL"):
        return "hangul"
    if name.startswith("LATIN"):
        return "latin"
    return "other"


def detect_language(text: str) -> str:
    """The language a question is written in, from its script: ``zh``, ``ja``, ``ko``,
    ``en`` (Latin letters), or ``und`` when its letters say nothing clear."""
    counts: dict[str, int] = {}
    for char in text:
        if unicodedata.category(char).startswith("L"):
            script = _script(char)
            if script is not None:
                counts[script] = counts.get(script, 0) + 1
    letters = sum(counts.values())
    if not letters:
        return "und"
    cjk = counts.get("han", 0) + counts.get("kana", 0) + counts.get("hangul", 0)
    if cjk / letters >= _CJK_SHARE:
        if counts.get("kana"):
            return "ja"
        if counts.get("hangul", 0) > counts.get("han", 0):
            return "ko"
        return "zh"
    if counts.get("latin", 0) / letters >= 1 - _CJK_SHARE:
        return "en"
    return "und"


def answer_language(plan_language: str, setting: LanguageSetting = "auto") -> AnswerLanguage:
    """The language an answer is written in: the setting when it names one, else the plan's
    language when answers exist in it, else Chinese."""
    if setting != "auto":
        return setting
    primary = primary_subtag(plan_language)
    return "en" if primary == "en" else "zh"
