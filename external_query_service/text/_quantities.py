"""Numbers written in a text, read as values with their units.

The same quantity is written many ways: ``2.6亿吨`` and ``260000000 t``, ``26%`` and
``百分之二十六``, ``２６`` (full width), ``1,200`` (thousands separator), ``二十六`` and
``两千`` (Chinese numerals), ``-3 °C`` and ``零下3度``. ``find_quantities`` reads each one
as a ``Quantity``: its value as an exact ``Decimal`` (so ``24`` equals ``24.0``) and its unit
in one canonical spelling when the unit is a known one (``°C``, ``%``, ``t``, ``km/h`` ...;
an unknown measure word such as ``级`` leaves the unit empty). In a range (``18-24 °C``,
``18至24度``) both ends carry the unit written after the second.

Chinese numerals count only as a run that reads as a number: one with a place word
(``二十六``, ``两千``, ``十万``), four or more digits read one by one (``二〇二六``), a
decimal (``三点五``), or any numeral after ``百分之``. A single ``一`` or ``十``, or a run
such as ``一一`` or ``千万``, is too often part of a word.

Pure: no I/O. Every pattern is linear in the text's length.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

__all__ = ["Quantity", "find_quantities", "same_quantity"]


@dataclass(frozen=True, slots=True)
class Quantity:
    """One number in a text: its value, its canonical unit (``""`` when none or unknown),
    and where it was written (``start``, ``end``: offsets into the NFKC-folded text)."""

    value: Decimal
    unit: str
    start: int
    end: int

    def spelled(self) -> str:
        """The quantity as a reader would write it (``24 °C``, ``26%``)."""
        value = format(self.value.normalize(), "f")
        if not self.unit:
            return value
        return f"{value}{self.unit}" if self.unit == "%" else f"{value} {self.unit}"


def same_quantity(left: Quantity, right: Quantity) -> bool:
    """Equal values, and equal units where both carry one (°C vs °F is a mismatch: no
    conversion)."""
    if left.value != right.value:
        return False
    return not left.unit or not right.unit or left.unit == right.unit


# Canonical spelling of the units recognised after a number. Names only: a unit not listed
# here is read as no unit, so it can never make two quantities disagree.
_UNITS: dict[str, str] = {
    "°c": "°C",
    "℃": "°C",
    "度": "°C",
    "摄氏度": "°C",
    "°f": "°F",
    "℉": "°F",
    "华氏度": "°F",
    "%": "%",
    "percent": "%",
    "km/h": "km/h",
    "公里/小时": "km/h",
    "m/s": "m/s",
    "米/秒": "m/s",
    "mm": "mm",
    "毫米": "mm",
    "cm": "cm",
    "厘米": "cm",
    "km": "km",
    "公里": "km",
    "千米": "km",
    "m": "m",
    "米": "m",
    "kg": "kg",
    "公斤": "kg",
    "千克": "kg",
    "t": "t",
    "吨": "t",
    "hpa": "hPa",
    "百帕": "hPa",
}
#: Scale words written after a number (``2.6亿``, ``3 million``).
_SCALES: dict[str, Decimal] = {
    "万亿": Decimal(10) ** 12,
    "亿": Decimal(10) ** 8,
    "千万": Decimal(10) ** 7,
    "百万": Decimal(10) ** 6,
    "万": Decimal(10) ** 4,
    "千": Decimal(10) ** 3,
    "thousand": Decimal(10) ** 3,
    "million": Decimal(10) ** 6,
    "billion": Decimal(10) ** 9,
    "trillion": Decimal(10) ** 12,
}
_DIGITS = {
    "零": 0,
    "〇": 0,
    "一": 1,
    "二": 2,
    "两": 2,
    "三": 3,
    "四": 4,
    "五": 5,
    "六": 6,
    "七": 7,
    "八": 8,
    "九": 9,
}
_SMALL_UNITS = {"十": 10, "百": 100, "千": 1000}
_LARGE_UNITS = {"万": 10**4, "亿": 10**8}

_CJK_NUMERAL = "零〇一二两三四五六七八九十百千万亿"
_UNIT_ALTERNATION = "|".join(
    re.escape(name) for name in sorted(_UNITS, key=len, reverse=True) if name != "%"
)
_SCALE_ALTERNATION = "|".join(re.escape(name) for name in sorted(_SCALES, key=len, reverse=True))
_SIGN = r"(?P<sign>零下|负|[-−+])?"
_ARABIC = r"(?P<arabic>\d{1,18}(?:,\d{3}){0,6}(?:\.\d{1,12})?)"
_DIGIT_CHARS = "零〇一二两三四五六七八九"
_CHINESE = (
    rf"(?P<chinese>[{_CJK_NUMERAL}]{{2,16}}(?:点[{_DIGIT_CHARS}]{{1,8}})?"
    rf"|[{_CJK_NUMERAL}]点[{_DIGIT_CHARS}]{{1,8}})"
)
_QUANTITY = re.compile(
    rf"(?P<percent_of>百分之)?{_SIGN}(?:{_ARABIC}|{_CHINESE}|(?<=百分之)(?P<one>[{_CJK_NUMERAL}]))"
    rf"(?:[ \u00a0]{{0,2}}(?P<scale>{_SCALE_ALTERNATION})(?![A-Za-z]))?"
    rf"(?:[ \u00a0]{{0,2}}(?P<unit>%|(?:{_UNIT_ALTERNATION})(?![A-Za-z])))?",
    re.IGNORECASE,
)
_RANGE = re.compile(r"\s{0,2}(?:[-~–—～]|至|到|to)\s{0,2}")


def _chinese_value(text: str) -> Decimal | None:
    """``二十六`` → 26, ``两千`` → 2000, ``三点五`` → 3.5, ``二〇二六`` → 2026; None for a
    run that is a word rather than a number (``一一``, ``千万``, ``万一``)."""
    whole, _, fraction = text.partition("点")
    if whole[0] not in _DIGITS and whole[0] != "十":
        return None  # a number starts with a digit or 十: 千万 and 万一 are words
    if all(char in _DIGITS for char in whole):
        if len(whole) < 4 and not fraction:
            return None  # 一一, 三三: repeated or listed digits, not a number
        # Digit by digit (二〇二六), as years and codes are read.
        number = Decimal("".join(str(_DIGITS[char]) for char in whole))
    else:
        total = section = digit = 0
        for char in whole:
            if char in _DIGITS:
                digit = _DIGITS[char]
            elif char in _SMALL_UNITS:
                section += (digit or 1) * _SMALL_UNITS[char]
                digit = 0
            else:  # 万, 亿
                total = (total + section + digit) * _LARGE_UNITS[char]
                section = digit = 0
        number = Decimal(total + section + digit)
    if fraction:
        if not all(char in _DIGITS for char in fraction):
            return None
        number += Decimal("0." + "".join(str(_DIGITS[char]) for char in fraction))
    return number


def _value(match: re.Match[str]) -> Decimal | None:
    arabic, chinese, one = match.group("arabic"), match.group("chinese"), match.group("one")
    try:
        if arabic:
            value = Decimal(arabic.replace(",", ""))
        elif one:
            value = Decimal(_DIGITS.get(one, _SMALL_UNITS.get(one, _LARGE_UNITS.get(one, 0))))
        else:
            parsed = _chinese_value(chinese or "")
            if parsed is None:
                return None
            value = parsed
    except InvalidOperation:
        return None
    if match.group("sign") in ("-", "−", "负", "零下"):
        value = -value
    if scale := match.group("scale"):
        value *= _SCALES[scale.lower()]
    return value


def _unit(match: re.Match[str]) -> str:
    if match.group("percent_of"):
        return "%"
    written = match.group("unit")
    return _UNITS.get(written.lower(), "") if written else ""


def find_quantities(text: str) -> tuple[Quantity, ...]:
    """Every quantity in ``text`` (NFKC-folded first), in order of appearance."""
    folded = unicodedata.normalize("NFKC", text)
    found: list[Quantity] = []
    for match in _QUANTITY.finditer(folded):
        sign = match.group("sign")
        if sign in ("-", "+") and match.start() > 0 and folded[match.start() - 1].isalnum():
            # 18-24: a range or a hyphenated code, not a negative number.
            found_at = match.start("sign") + 1
            match = _QUANTITY.match(folded, found_at) or match
        value = _value(match)
        if value is None:
            continue
        found.append(Quantity(value, _unit(match), match.start(), match.end()))
    return tuple(_ranges_share_units(folded, found))


def _ranges_share_units(text: str, found: list[Quantity]) -> list[Quantity]:
    """In ``18-24 °C`` the first end takes the unit written after the second."""
    for index in range(len(found) - 2, -1, -1):
        first, second = found[index], found[index + 1]
        if first.unit or not second.unit:
            continue
        if _RANGE.fullmatch(text[first.end : second.start]):
            found[index] = Quantity(first.value, second.unit, first.start, first.end)
    return found
