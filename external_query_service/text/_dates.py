"""Explicit calendar dates written in a text (never relative ones such as "today").

Recognised after NFKC (so full-width digits count): ``2025-05-14``, ``2025/5/14``,
``2025.05.14``, ``2025年5月14日`` (or ``号``), ``May 14, 2025`` and ``14 May 2025`` (month
names and common abbreviations, any case). Years outside 1900–2100 and impossible days
(2025-02-30) are dropped. Every quantifier in the pattern is bounded, so a scan is linear in
the length of the text whatever it holds.

Chinese month-day dates without a year (``12月1日``, common on forecast and news pages) count
only when the caller gives a ``reference`` date (the page's publication date): they take the
year that puts them closest to it. English month-day without a year is never read ("may 14"
is too often not a date).
"""

from __future__ import annotations

import re
import unicodedata
from datetime import date
from typing import Final

__all__ = [
    "MAX_YEAR",
    "MIN_YEAR",
    "date_spans",
    "find_dates",
]

MIN_YEAR: Final = 1900
MAX_YEAR: Final = 2100

_MONTHS: Final = {
    "jan": 1,
    "feb": 2,
    "mar": 3,
    "apr": 4,
    "may": 5,
    "jun": 6,
    "jul": 7,
    "aug": 8,
    "sep": 9,
    "oct": 10,
    "nov": 11,
    "dec": 12,
}
_MONTH = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
_SP = r"[ \t\u00a0]{1,3}"
_ORDINAL = r"(?:st|nd|rd|th)?"
# Between day (or month) and year: a comma and/or a space.
_COMMA = r"(?:,[ \t\u00a0]{0,3}|[ \t\u00a0]{1,3})"

_DATE = re.compile(
    # 2025-05-14, 2025/5/14, 2025.05.14: the same separator twice, no digits around.
    r"(?<![\d.])(?P<iy>\d{4})(?P<sep>[-/.])(?P<im>\d{1,2})(?P=sep)(?P<id>\d{1,2})(?![\d])"
    r"|(?<!\d)(?P<cy>\d{4}) {0,2}年 {0,2}(?P<cm>\d{1,2}) {0,2}月 {0,2}(?P<cd>\d{1,2}) {0,2}[日号]"
    rf"|\b(?P<em>{_MONTH})\.?{_SP}(?P<ed>\d{{1,2}}){_ORDINAL}{_COMMA}(?P<ey>\d{{4}})(?!\d)"
    r"|(?<![\d年])(?P<nm>\d{1,2}) {0,2}月 {0,2}(?P<nd>\d{1,2}) {0,2}[日号]"
    rf"|\b(?P<dd>\d{{1,2}}){_ORDINAL}{_SP}(?P<dm>{_MONTH})\.?{_COMMA}(?P<dy>\d{{4}})(?!\d)",
    re.IGNORECASE,
)


def _to_date(year: str, month: str | int, day: str) -> date | None:
    number = int(year)
    if not MIN_YEAR <= number <= MAX_YEAR:
        return None
    try:
        return date(number, int(month), int(day))
    except ValueError:
        return None


def _nearest(reference: date, month: str, day: str) -> date | None:
    """The month-day, in the year before, of or after ``reference``, that lies closest to it."""
    candidates = []
    for year in (reference.year - 1, reference.year, reference.year + 1):
        value = _to_date(str(year), month, day)
        if value is not None:
            candidates.append(value)
    return min(candidates, key=lambda value: abs(value - reference), default=None)


def date_spans(text: str, *, reference: date | None = None) -> tuple[tuple[int, int, date], ...]:
    """Every explicit date in ``text`` with where it is written: ``(start, end, date)``,
    offsets into the NFKC-folded text, in order (duplicates kept). Read like
    ``find_dates``."""
    found: list[tuple[int, int, date]] = []
    for match in _DATE.finditer(unicodedata.normalize("NFKC", text)):
        value = _match_date(match, reference)
        if value is not None:
            found.append((match.start(), match.end(), value))
    return tuple(found)


def _match_date(match: re.Match[str], reference: date | None) -> date | None:
    groups = match.groupdict()
    if groups["iy"]:
        return _to_date(groups["iy"], groups["im"], groups["id"])
    if groups["cy"]:
        return _to_date(groups["cy"], groups["cm"], groups["cd"])
    if groups["nm"]:
        return _nearest(reference, groups["nm"], groups["nd"]) if reference else None
    if groups["em"]:
        return _to_date(groups["ey"], _MONTHS[groups["em"][:3].lower()], groups["ed"])
    return _to_date(groups["dy"], _MONTHS[groups["dm"][:3].lower()], groups["dd"])


def find_dates(text: str, *, limit: int = 8, reference: date | None = None) -> tuple[date, ...]:
    """Up to ``limit`` distinct explicit dates in ``text``, in order of first appearance.

    With ``reference``, Chinese month-day dates without a year count too (see the module
    docstring).
    """
    found: list[date] = []
    if limit < 1:
        return ()
    for match in _DATE.finditer(unicodedata.normalize("NFKC", text)):
        value = _match_date(match, reference)
        if value is not None and value not in found:
            found.append(value)
            if len(found) >= limit:
                break
    return tuple(found)
