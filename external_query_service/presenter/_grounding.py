"""Per-sentence grounding of a model-written answer: every claim in the evidence it cites.

The answer is split into sentences (Chinese and English end punctuation, line breaks; never
inside a quotation). A sentence that states something must cite evidence inline (an
``[ev-…]`` id or ``[n]``, the number of a source in the answer's source list), and what it
states must occur in the evidence it cites:

- every number, compared by value (``text._quantities``: ``2.6亿吨`` = ``260000000 t``,
  ``26%`` = ``百分之二十六``), with units agreeing where both sides carry a known one
  (``invented_number``, ``unit_mismatch``);
- every date: absolute ones, and ``今天``/``明天``/``today``/``tomorrow``… read from the
  cited evidence's access date, must be a date the evidence states (its dates, the dates
  written in it, and its own relative words read from its publication date); a relative
  year (``明年六月底``, ``June next year``), read from the cited evidence's publication date,
  must be a year and month the evidence states (its dates, years and months written in it,
  and its own relative years read from its publication date); every time of day
  (``14:30``) must be written in it (``wrong_date``);
- every quoted span (「…」, “…”, "…") must be a substring of it, compared after NFKC,
  case folding and whitespace folding (``unquoted_span``).

Headings (``# …``, ``【…】``, ``**…**``), list labels (a line ending in a colon) and text
without a word are not statements (``not_a_statement``). Nothing here knows any claim's
words: the rules read numbers, dates, quotation marks and citation markers only.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from decimal import Decimal

from ..models import Evidence, SentenceCheck, SentenceVerdict
from ..text._dates import date_spans
from ..text._quantities import Quantity, find_quantities, same_quantity

__all__ = ["EVIDENCE_ID", "cited_numbers", "ground_sentences", "split_sentences"]

#: Ids minted by ``adapters._base.evidence_id``, as a model writes them in its text.
EVIDENCE_ID = re.compile(r"(?<![A-Za-z0-9_-])ev-[0-9a-f]{6,64}(?![0-9A-Za-z])")
_NUMBERED = re.compile(r"\[\s*(\d{1,3}(?:\s*[,，、]\s*\d{1,3}){0,15})\s*\]")
_URL = re.compile(
    r"(?i)(?:[a-z][a-z0-9+.-]{0,15}:)?//[^\s<>\"'`()\[\]{}|\\^「」『』（），。；！？、]+"
)
_LIST_MARKER = re.compile(r"\A\s{0,8}(?:[-*•·]|\d{1,3}[.、)]|\(\d{1,3}\)|（\d{1,3}）)\s+")
#: A Markdown heading, or a line that is only a bracketed or bold label.
_HEADING = re.compile(
    r"\A\s{0,3}(?:#{1,6}\s|(?:【[^】]{0,80}】|\[[^\]]{0,80}\]|\*\*.{0,80}\*\*)\s*\Z)"
)
_WORD = re.compile(r"\w")
_CITED = r"(?:ev-[0-9a-f]{6,64}|\d{1,3})"
_CITATION = rf"\[\s*{_CITED}(?:\s*[,，、]\s*{_CITED}){{0,15}}\s*\]"
_TRAILING_CITATIONS = re.compile(rf"(?:\s{{0,3}}{_CITATION})+")
_QUOTES = re.compile(r"「([^」]{1,400})」|“([^”]{1,400})”|\"([^\"]{1,400})\"")
_TIME_OF_DAY = re.compile(r"(?<![\d:])([01]?\d|2[0-3]):([0-5]\d)(?![\d:])")
_SPACES = re.compile(r"\s+")
_ENDS = frozenset("。！？!?")
_OPENING = {"「": "」", "“": "”", "『": "』"}
#: Relative day words and their offset from the day they are read from.
_RELATIVE_DAYS: dict[str, int] = {
    "大前天": -3,
    "前天": -2,
    "昨天": -1,
    "昨日": -1,
    "今天": 0,
    "今日": 0,
    "明天": 1,
    "明日": 1,
    "后天": 2,
    "大后天": 3,
    "day before yesterday": -2,
    "yesterday": -1,
    "today": 0,
    "tonight": 0,
    "tomorrow": 1,
    "day after tomorrow": 2,
}
_RELATIVE = re.compile(
    "|".join(
        rf"\b{re.escape(word)}\b" if word.isascii() else re.escape(word)
        for word in sorted(_RELATIVE_DAYS, key=len, reverse=True)
    ),
    re.IGNORECASE,
)


#: Relative year words and their offset from the year they are read from.
_RELATIVE_YEARS: dict[str, int] = {
    "前年": -2,
    "去年": -1,
    "今年": 0,
    "明年": 1,
    "后年": 2,
    "last": -1,
    "this": 0,
    "next": 1,
}
_MONTH_NAMES = (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)
_CHINESE_MONTHS = ("一", "二", "三", "四", "五", "六", "七", "八", "九", "十", "十一", "十二")
_CN_MONTH = r"(?P<{name}>1[0-2]|0?[1-9]|十[一二]?|[一二三四五六七八九])\s{{0,2}}月"
_EN_MONTH = "|".join(_MONTH_NAMES)
#: A year named relative to the day it is read from, with its month when one is given:
#: ``明年六月``, ``去年``, ``next year``, ``June next year``, ``June of last year``.
_RELATIVE_YEAR = re.compile(
    rf"(?P<cn>前年|去年|今年|明年|后年)(?:的)?(?:{_CN_MONTH.format(name='cn_month')})?"
    rf"|(?:\b(?P<en_month>{_EN_MONTH})\s{{1,3}}(?:of\s{{1,3}})?)?\b(?P<en>last|this|next)\s{{1,3}}year\b",
    re.IGNORECASE,
)
#: A year written out, with its month when one is given: ``2027年6月``, ``2027年``,
#: ``June 2027``.
_WRITTEN_YEAR = re.compile(
    rf"(?<!\d)(?P<year>\d{{4}})\s{{0,2}}年(?:\s{{0,2}}{_CN_MONTH.format(name='month')})?"
    rf"|\b(?P<en_month>{_EN_MONTH})\s{{1,3}}(?P<en_year>\d{{4}})(?!\d)",
    re.IGNORECASE,
)


def _month(written: str | None) -> int:
    """``6``, ``六``, ``十二``, ``June`` as a month number; 0 when none is given."""
    if not written:
        return 0
    if written.isdigit():
        return int(written)
    if written in _CHINESE_MONTHS:
        return _CHINESE_MONTHS.index(written) + 1
    return _MONTH_NAMES.index(written.lower()) + 1


def _relative_periods(text: str, reference: date) -> Iterable[tuple[tuple[int, int], str]]:
    """Each relative year (with its month, 0 when none) in ``text`` read from
    ``reference``, with the words that name it."""
    for match in _RELATIVE_YEAR.finditer(text):
        word = (match.group("cn") or match.group("en")).lower()
        month = _month(match.group("cn_month") or match.group("en_month"))
        yield (reference.year + _RELATIVE_YEARS[word], month), match.group(0)


def _periods(
    text: str, dates: Iterable[date], published: date | None
) -> frozenset[tuple[int, int]]:
    """The years and months ``text`` states (``(year, 0)`` for a year), from its dates,
    years written out, and its own relative years read from its publication date."""
    found: set[tuple[int, int]] = set()
    for day in dates:
        found |= {(day.year, day.month), (day.year, 0)}
    for match in _WRITTEN_YEAR.finditer(text):
        year = int(match.group("year") or match.group("en_year"))
        found |= {(year, _month(match.group("month") or match.group("en_month"))), (year, 0)}
    if published is not None:
        for (year, month), _words in _relative_periods(text, published):
            found |= {(year, month), (year, 0)}
    return frozenset(found)


def split_sentences(text: str) -> tuple[str, ...]:
    """``text`` as sentences: cut after 。！？!? (and after ``.`` followed by a space) and at
    line breaks, never inside 「…」, “…”, 『…』 or "…". A piece without a word character (a
    citation written after the full stop, a closing quotation mark) joins the sentence
    before it."""
    pieces: list[str] = []
    for line in text.split("\n"):
        pieces.extend(_split_line(line))
    sentences: list[str] = []
    for piece in pieces:
        bare = _NUMBERED.sub("", EVIDENCE_ID.sub("", piece))
        if sentences and not _WORD.search(bare) and piece.strip():
            sentences[-1] += piece
        elif piece.strip():
            sentences.append(piece)
    return tuple(sentence.strip() for sentence in sentences)


def _split_line(line: str) -> list[str]:
    pieces: list[str] = []
    start = index = 0
    closing: list[str] = []
    while index < len(line):
        char = line[index]
        index += 1
        if closing and char == closing[-1]:
            closing.pop()
        elif char in _OPENING:
            closing.append(_OPENING[char])
        elif char == '"':
            closing.append('"')
        elif not closing and (char in _ENDS or (char == "." and line[index : index + 1] in " ")):
            # Citations written after the full stop still belong to this sentence.
            trailing = _TRAILING_CITATIONS.match(line, index)
            index = trailing.end() if trailing else index
            pieces.append(line[start:index])
            start = index
    pieces.append(line[start:])
    return pieces


@dataclass(frozen=True, slots=True)
class _Grounds:
    """What the cited evidence states, read once per evidence."""

    text: str  # NFKC, case- and space-folded: quotes are looked up here
    quantities: tuple[Quantity, ...]
    dates: frozenset[date]
    times: frozenset[tuple[int, int]]
    today: date  # the day the evidence was read: relative words in the answer start here
    #: The years and months it states (``(year, 0)`` a year); and the day a relative year
    #: in the answer is read from: its publication date, else the day it was read.
    periods: frozenset[tuple[int, int]]
    written: date


def _fold(text: str) -> str:
    return _SPACES.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def _grounds(item: Evidence) -> _Grounds:
    """The numbers, dates, times and text ``item`` states."""
    text = "\n".join((item.title, item.snippet))
    folded = unicodedata.normalize("NFKC", text)
    quantities = list(find_quantities(text))
    for fact in item.facts:
        quantities.extend(find_quantities(f"{fact.value} {fact.unit}".strip()))
    published = item.published_at
    dates = {*item.about_dates, *([published] if published else [])}
    reference = published or (item.about_dates[0] if item.about_dates else None)
    dates |= {found for _s, _e, found in date_spans(text, reference=reference)}
    if published is not None:
        dates |= {
            published + timedelta(days=_RELATIVE_DAYS[m.group(0).lower()])
            for m in _RELATIVE.finditer(folded)
        }
    # The year, month and day of each date stand as numbers too ("12月1日" in an answer
    # citing an evidence dated 2026-12-01 only by its metadata).
    for day in dates:
        quantities.extend(
            Quantity(Decimal(part), "", 0, 0) for part in (day.year, day.month, day.day)
        )
    times = {(int(h), int(m)) for h, m in _TIME_OF_DAY.findall(folded)}
    return _Grounds(
        text=_fold(text),
        quantities=tuple(quantities),
        dates=frozenset(dates),
        times=frozenset(times),
        today=item.accessed_at.date(),
        periods=_periods(folded, dates, published),
        written=published or item.accessed_at.date(),
    )


def ground_sentences(
    text: str,
    evidence: Mapping[str, Evidence],
    numbered: Mapping[int, tuple[str, ...]],
) -> tuple[SentenceCheck, ...]:
    """Each sentence of ``text`` with its verdict. ``evidence`` maps the admitted evidence
    ids; ``numbered`` maps a source number ``[n]`` to the evidence ids listed under it."""
    cache: dict[str, _Grounds] = {}

    def grounds_of(evidence_id: str) -> _Grounds:
        if evidence_id not in cache:
            cache[evidence_id] = _grounds(evidence[evidence_id])
        return cache[evidence_id]

    checks = []
    for sentence in split_sentences(text):
        cited = _citations(sentence, evidence, numbered)
        verdict, detail = _verdict(sentence, [grounds_of(eid) for eid in cited])
        checks.append(
            SentenceCheck(sentence=sentence[:300], citations=cited, verdict=verdict, detail=detail)
        )
    return tuple(checks)


def cited_numbers(text: str) -> Iterable[int]:
    """The source numbers ``[n]`` (``[1, 2]``, ``[1][2]``) written in ``text``."""
    for group in _NUMBERED.findall(text):
        yield from (int(number) for number in re.split(r"\s*[,，、]\s*", group))


def _citations(
    sentence: str, evidence: Mapping[str, Evidence], numbered: Mapping[int, tuple[str, ...]]
) -> tuple[str, ...]:
    cited = [found for found in EVIDENCE_ID.findall(sentence) if found in evidence]
    for number in cited_numbers(sentence):
        cited.extend(numbered.get(number, ()))
    return tuple(dict.fromkeys(cited))


def _claims(sentence: str) -> str:
    """The sentence without what is not a claim: citations, links and a list marker."""
    plain = _NUMBERED.sub(" ", EVIDENCE_ID.sub(" ", unicodedata.normalize("NFKC", sentence)))
    return _LIST_MARKER.sub("", _URL.sub(" ", plain))


def _is_statement(claims: str) -> bool:
    """Does this sentence (citations and links removed) state something?"""
    stripped = claims.strip()
    if not _WORD.search(stripped) or _HEADING.match(stripped):
        return False
    return not stripped.endswith((":", "："))


def _verdict(sentence: str, cited: Sequence[_Grounds]) -> tuple[SentenceVerdict, str]:
    claims = _claims(sentence)
    if not _is_statement(claims):
        return "not_a_statement", ""
    if not cited:
        return "uncited_statement", "states something without a citation"
    for check in (_quotes, _dates, _numbers):
        found = check(claims, cited)
        if found is not None:
            return found
    return "grounded", ""


def _quotes(claims: str, cited: Sequence[_Grounds]) -> tuple[SentenceVerdict, str] | None:
    for match in _QUOTES.finditer(claims):
        quoted = _fold(next(group for group in match.groups() if group is not None))
        if quoted and not any(quoted in ground.text for ground in cited):
            return "unquoted_span", f"{match.group(0)[:80]} is not in the cited evidence"
    return None


def _without(claims: str, spans: Iterable[tuple[int, int]]) -> str:
    chars = list(claims)
    for start, end in spans:
        chars[start:end] = " " * (end - start)
    return "".join(chars)


def _dates(claims: str, cited: Sequence[_Grounds]) -> tuple[SentenceVerdict, str] | None:
    stated = frozenset().union(*(ground.dates for ground in cited))
    times = frozenset().union(*(ground.times for ground in cited))
    reference = min((day for day in stated), default=None) or cited[0].today
    for _start, _end, day in date_spans(claims, reference=reference):
        if day not in stated:
            return "wrong_date", f"{day.isoformat()} is not a date of the cited evidence"
    for match in _RELATIVE.finditer(claims):
        offset = timedelta(days=_RELATIVE_DAYS[match.group(0).lower()])
        if not any(ground.today + offset in stated for ground in cited):
            return "wrong_date", f"{match.group(0)} is not a date of the cited evidence"
    # A relative year ("明年六月底") is read from each cited evidence's publication date:
    # the year (and month) it names must be one that evidence states.
    for ground in cited:
        if all(period in ground.periods for period, _ in _relative_periods(claims, ground.written)):
            break
    else:
        words = next(named for _, named in _relative_periods(claims, cited[0].written))
        return "wrong_date", f"{words} is not a date of the cited evidence"
    for hour, minute in _TIME_OF_DAY.findall(claims):
        if (int(hour), int(minute)) not in times:
            return "wrong_date", f"{hour}:{minute} is not a time in the cited evidence"
    return None


def _numbers(claims: str, cited: Sequence[_Grounds]) -> tuple[SentenceVerdict, str] | None:
    # Dates, times, relative years and quotations were checked as such: their digits are
    # not quantities.
    reference = cited[0].today
    spans = [(start, end) for start, end, _day in date_spans(claims, reference=reference)]
    spans += [match.span() for match in _TIME_OF_DAY.finditer(claims)]
    spans += [match.span() for match in _RELATIVE_YEAR.finditer(claims)]
    spans += [match.span() for match in _QUOTES.finditer(claims)]
    stated = [quantity for ground in cited for quantity in ground.quantities]
    for quantity in find_quantities(_without(claims, spans)):
        if any(same_quantity(quantity, known) for known in stated):
            continue
        if any(known.value == quantity.value for known in stated):
            return "unit_mismatch", f"{quantity.spelled()} has another unit in the cited evidence"
        return "invented_number", f"{quantity.spelled()} does not occur in the cited evidence"
    return None
