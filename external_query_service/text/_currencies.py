"""Currency names from CLDR (through Babel): every name a currency goes by, and the code a name
stands for.

A currency's aliases are its ISO 4217 code, its display names in ``LOCALES`` (singular and
plural forms) and its symbols there — but only names and symbols that stand for exactly one
currency across those locales: ``¥`` is CNY in ``zh`` and JPY in ``zh_Hant`` and ``en``, and
``$`` is USD in ``en`` and TWD in ``zh_Hant``, so neither names anything. Names are compared
after ``normalize_for_match``, so ``人民幣`` and ``人民币`` are one name.

CLDR has no entry for the common abbreviation ``RMB``; it is deliberately not added here by
hand (the table is CLDR's, not ours), so a text that only says "RMB" does not name CNY.

Babel's locale data is read on first use, once, and kept (``functools.cache``); importing this
module reads nothing.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache

from ._targets import normalize_for_match

__all__ = [
    "LOCALES",
    "currency_aliases",
    "currency_code",
    "currency_pair",
    "iso_codes",
]

#: Locales whose names and symbols count: questions and pages are Chinese (simplified and
#: traditional), and Chinese pages quote currencies by their English names too.
LOCALES = ("zh", "zh_Hant", "en")

#: Counts that reach every plural form these locales have: ``zh`` and ``zh_Hant`` have only
#: "other"; ``en`` has "one" (1) and "other" (2). ``None`` is the display name itself.
_COUNTS: tuple[int | None, ...] = (None, 1, 2)


@dataclass(frozen=True, slots=True)
class _Table:
    #: code → aliases, the code first, first-seen spelling of each normalized name.
    aliases: dict[str, tuple[str, ...]]
    #: normalized name → the one code it stands for.
    codes: dict[str, str]


def _code_shaped(text: str) -> bool:
    return len(text) == 3 and text.isascii() and text.isalpha()


def currency_pair(
    entities: Iterable[str], known: frozenset[str] | None = None
) -> tuple[str, str] | None:
    """The first two distinct three-ASCII-letter entities, upper-cased, base first.

    A structural rule, not a list of currency words. With ``known`` (a provider's currency
    list, or ``iso_codes()``) only codes it holds count, so an entity like ``GDP`` cannot take
    a currency's place.
    """
    codes: list[str] = []
    for entity in entities:
        code = entity.strip().upper()
        if _code_shaped(code) and code not in codes and (known is None or code in known):
            codes.append(code)
            if len(codes) == 2:
                return codes[0], codes[1]
    return None


@cache
def _table() -> _Table:
    """Every CLDR currency's names in ``LOCALES``, and which names are unambiguous."""
    # Babel is imported here rather than at module level: its import and locale data are
    # only needed by the first currency question.
    from babel import Locale
    from babel.numbers import get_currency_name, get_currency_symbol, list_currencies

    locales = [Locale.parse(name) for name in LOCALES]
    spelled: dict[str, dict[str, str]] = {}  # code → normalized name → first spelling
    owners: defaultdict[str, set[str]] = defaultdict(set)  # normalized name → codes
    for code in sorted(list_currencies()):
        names = [code]
        for locale in locales:
            names += [get_currency_name(code, count, locale) for count in _COUNTS]
            names.append(get_currency_symbol(code, locale))
        kept = spelled.setdefault(code, {})
        for name in names:
            key = normalize_for_match(name)
            if key:
                kept.setdefault(key, name.strip())
                owners[key].add(code)
    # A name shared by several currencies names none of them; a code always names itself.
    aliases = {
        code: tuple(name for key, name in kept.items() if name == code or len(owners[key]) == 1)
        for code, kept in spelled.items()
    }
    codes = {key: next(iter(found)) for key, found in owners.items() if len(found) == 1}
    codes.update((code.casefold(), code) for code in spelled)
    return _Table(aliases=aliases, codes=codes)


def iso_codes() -> frozenset[str]:
    """Every currency code CLDR knows (current and historical)."""
    return frozenset(_table().aliases)


def currency_aliases(code: str) -> tuple[str, ...]:
    """The names ``code`` goes by, the upper-cased code first; just the code when CLDR does
    not know it."""
    upper = code.strip().upper()
    return _table().aliases.get(upper, (upper,))


def currency_code(name: str) -> str | None:
    """The one currency ``name`` (a code, display name or symbol) stands for; None when it
    stands for none or for several (``¥``)."""
    return _table().codes.get(normalize_for_match(name))
