"""Admitted evidence that disagree on the value asked.

What is asked is known only where the plan fixes it:

- ``weather``: the temperature (the first one an evidence states, in °C or °F, read with
  the next one as a low and a high when the same sentence gives it in the same unit: so
  ``最高24℃最低18℃`` and ``气温18至24℃`` are one range); values more than
  ``TEMPERATURE_SPREAD`` degrees apart disagree, two ranges end for end, and a lone value
  agrees with a range it falls in;
- ``exchange_rate``: the rate (a fact named ``rate``, else the first number other than 1
  written without a unit, dates left out); more than ``RATE_SPREAD`` apart (relative);
- any other kind: a fact the evidence's provider named (a quote's ``price``), compared with
  the same-named fact of other evidence; more than ``QUANTITY_SPREAD`` apart (relative).

A plan whose ``asked_value`` is ``event_date`` asks when its one event happened, whatever
its kind: the value compared is then the event's date, and two different days disagree. An
evidence states it only when its title and snippet name exactly one calendar date other
than its own publication date (inside the plan's range, when it has one): the publication
date is when the page was written, not when the event happened, and a text naming two
dates does not say which is the event's. Such evidence does not vote.

Where no evidence states a value the plan names (any other question, the fallback plan
among them), the value each passage gives is read where passages of other sites word the
statement alike (``_values``): one group of votes per slot, compared by its rules.

Only evidence about the same target (a compare target it covers, else the plan's) and the
same day (its first stated date in the plan's range, else its first stated date, else its
publication date; an event's date is itself the value, so it is compared across days) are
compared, and only with the same unit: °C against °F is no disagreement found, not a
conversion. Each independent source votes once (its best ranked evidence; copies are not
sources): values within the spread of one another form one opinion, and a value held by
more than half of the votes is the majority.

Pure: no I/O.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date
from decimal import Decimal

from ..models import Evidence, ExternalQueryPlan, ValueConflict
from ..net._sites import registrable_domain, url_host
from ..text._dates import date_spans, find_dates
from ..text._parts import covers, question_parts
from ..text._quantities import Quantity, find_quantities
from ..text._tokens import terms
from ._values import Reading, agree, slot_readings

__all__ = ["QUANTITY_SPREAD", "RATE_SPREAD", "TEMPERATURE_SPREAD", "value_conflicts"]

TEMPERATURE_SPREAD = Decimal(2)
RATE_SPREAD = Decimal("0.005")
QUANTITY_SPREAD = Decimal("0.01")
_TEMPERATURE_UNITS = frozenset({"°C", "°F"})
#: Where a sentence ends: a low and a high are read together only inside one sentence.
_SENTENCE_END = re.compile(r"[。！？；!?;\n]|\.(?:\s|$)")
#: The subject of an event's date; its value is the day's ordinal (``date.toordinal``).
_EVENT_DATE = "event_date"


@dataclass(frozen=True, slots=True)
class _Value:
    """What one evidence says: ``value``, or the range from ``value`` to ``high`` (a low and
    a high given together, as ``18至24℃`` or ``最高24℃最低18℃``)."""

    evidence: Evidence
    value: Decimal
    unit: str
    subject: str
    high: Decimal | None = None
    #: Where the value is a passage's reading at a slot (``_values``), that reading.
    reading: Reading | None = None

    @property
    def top(self) -> Decimal:
        return self.value if self.high is None else self.high

    def spelled(self) -> str:
        if self.reading is not None:
            return self.reading.text
        if self.subject == _EVENT_DATE:
            return date.fromordinal(int(self.value)).isoformat()
        if self.high is not None:
            low = format(self.value.normalize(), "f")
            return f"{low}–{Quantity(self.high, self.unit, 0, 0).spelled()}"
        return Quantity(self.value, self.unit, 0, 0).spelled()


def value_conflicts(
    plan: ExternalQueryPlan,
    ranked: Sequence[tuple[Evidence, tuple[str, ...]]],
) -> tuple[ValueConflict, ...]:
    """The disagreements among ``ranked`` (admitted evidence, best first, copies left out,
    each with the compare targets it covers)."""
    groups: dict[tuple[str | None, date | None, str, str], list[_Value]] = {}
    for evidence, covered in ranked:
        for value in _values(plan, evidence):
            day = None if value.subject == _EVENT_DATE else _day(plan, evidence)
            for target in covered or (None,):
                groups.setdefault((target, day, value.subject, value.unit), []).append(value)
    if not groups:
        _slot_groups(plan, ranked, groups)
    found: list[ValueConflict] = []
    for (target, _day_key, _subject, _unit), values in groups.items():
        found.extend(_disagreements(target, _one_per_site(values)))
    return tuple(found)


def _slot_groups(
    plan: ExternalQueryPlan,
    ranked: Sequence[tuple[Evidence, tuple[str, ...]]],
    groups: dict[tuple[str | None, date | None, str, str], list[_Value]],
) -> None:
    """Where no evidence states a value the plan names: what each passage gives where
    passages of other sites word the statement alike (``_values``), per slot."""
    covered = {evidence.evidence_id: targets for evidence, targets in ranked}
    # A question asked in parts: a passage is about the parts it covers, as a comparison's
    # evidence is about its targets (two parts' values are not one value).
    parts = () if plan.compare_targets else question_parts(plan.question)
    if parts:
        for evidence, _targets in ranked:
            held = frozenset(terms(f"{evidence.title}\n{evidence.snippet}"))
            covered[evidence.evidence_id] = tuple(part.text for part in parts if covers(part, held))
    for readings in slot_readings(plan.question, [evidence for evidence, _ in ranked]):
        for reading in readings:
            evidence = reading.evidence
            # A time-bound question compares statements about one day; any other compares
            # what the passages say whenever they were written.
            day = _day(plan, evidence) if plan.time_range is not None else None
            value = _Value(evidence, reading.value, reading.unit, reading.slot, reading=reading)
            for target in covered[evidence.evidence_id] or (None,):
                groups.setdefault((target, day, reading.slot, ""), []).append(value)


def _values(plan: ExternalQueryPlan, evidence: Evidence) -> Iterable[_Value]:
    if plan.asked_value == "event_date":
        day = _event_date(plan, evidence)
        if day is not None:
            yield _Value(evidence, Decimal(day.toordinal()), "", _EVENT_DATE)
        return
    if plan.query_kind == "weather":
        text = _without_dates(evidence.snippet)
        found = [q for q in find_quantities(text) if q.unit in _TEMPERATURE_UNITS]
        if found:
            low, high = _low_high(text, found)
            yield _Value(evidence, low, found[0].unit, "temperature", high)
        return
    if plan.query_kind == "exchange_rate":
        rate = _fact(evidence, "rate")
        if rate is None:
            text = _without_dates(evidence.snippet)
            rate = next(
                (q.value for q in find_quantities(text) if not q.unit and q.value not in (0, 1)),
                None,
            )
        if rate is not None:
            yield _Value(evidence, rate, "", "exchange_rate")
        return
    for fact in evidence.facts:
        value = _decimal(fact.value)
        if value is not None:
            yield _Value(evidence, value, fact.unit, fact.name)


def _event_date(plan: ExternalQueryPlan, evidence: Evidence) -> date | None:
    """The one date ``evidence`` gives for the plan's event, if it gives exactly one."""
    stated = find_dates(f"{evidence.title}\n{evidence.snippet}", reference=evidence.published_at)
    days = {day for day in stated if day != evidence.published_at}
    if plan.time_range is not None:
        days = {day for day in days if plan.time_range.covers(day)}
    return days.pop() if len(days) == 1 else None


def _low_high(text: str, found: Sequence[Quantity]) -> tuple[Decimal, Decimal | None]:
    """The first temperature, with the next one when the same sentence gives it in the same
    unit: a forecast's low and high, whichever it writes first (``最高24℃最低18℃`` and
    ``18至24℃`` are one range). A lone value has no high."""
    first = found[0]
    second = next(iter(found[1:]), None)
    if second is None or second.unit != first.unit:
        return first.value, None
    if _SENTENCE_END.search(text, first.end, second.start):
        return first.value, None
    if second.value == first.value:
        return first.value, None
    return min(first.value, second.value), max(first.value, second.value)


def _fact(evidence: Evidence, name: str) -> Decimal | None:
    return next((_decimal(f.value) for f in evidence.facts if f.name == name), None)


def _decimal(text: str) -> Decimal | None:
    found = find_quantities(text)
    return found[0].value if len(found) == 1 else None


def _without_dates(text: str) -> str:
    folded = unicodedata.normalize("NFKC", text)
    chars = list(folded)
    for start, end, _day in date_spans(folded):
        chars[start:end] = " " * (end - start)
    return "".join(chars)


def _day(plan: ExternalQueryPlan, evidence: Evidence) -> date | None:
    days = sorted(evidence.about_dates)
    if plan.time_range is not None:
        inside = [d for d in days if plan.time_range.start <= d <= plan.time_range.end]
        days = inside or days
    return days[0] if days else evidence.published_at


def _one_per_site(values: Sequence[_Value]) -> list[_Value]:
    seen: dict[str, _Value] = {}
    for value in values:
        seen.setdefault(registrable_domain(url_host(value.evidence.url)), value)
    return list(seen.values())


def _close(subject: str, left: Decimal, right: Decimal) -> bool:
    if subject == _EVENT_DATE:
        return left == right
    if subject == "temperature":
        return abs(left - right) <= TEMPERATURE_SPREAD
    spread = RATE_SPREAD if subject == "exchange_rate" else QUANTITY_SPREAD
    scale = max(abs(left), abs(right))
    return scale == 0 or abs(left - right) / scale <= spread


def _agree(left: _Value, right: _Value) -> bool:
    """Two ranges agree end for end; a lone value agrees with a range it falls in (or near
    either end of); two lone values agree within the spread; readings at a slot by the
    slot's rules (``_values.agree``)."""
    if left.reading is not None and right.reading is not None:
        return agree(left.reading, right.reading)
    subject = left.subject
    if (left.high is None) != (right.high is None):
        one, span = (left, right) if left.high is None else (right, left)
        inside = span.value <= one.value <= span.top
        return (
            inside or _close(subject, one.value, span.value) or _close(subject, one.value, span.top)
        )
    return _close(subject, left.value, right.value) and _close(subject, left.top, right.top)


def _disagreements(target: str | None, votes: list[_Value]) -> list[ValueConflict]:
    """One conflict per opinion that differs from the largest one."""
    if len(votes) < 2:
        return []
    # Votes that agree, directly or through others, are one opinion.
    opinions: list[list[_Value]] = []
    for vote in votes:
        joined = [group for group in opinions if any(_agree(vote, v) for v in group)]
        opinions = [group for group in opinions if all(group is not j for j in joined)]
        opinions.append([member for group in joined for member in group] + [vote])
    if len(opinions) < 2:
        return []
    # The largest opinion first; among equals, the one whose best-ranked vote ranks first.
    order = {id(vote): rank for rank, vote in enumerate(votes)}
    opinions.sort(key=lambda group: (-len(group), min(order[id(v)] for v in group)))
    majority = 2 * len(opinions[0]) > len(votes)
    lead = min(opinions[0], key=lambda v: order[id(v)])
    conflicts = []
    for other in opinions[1:]:
        second = min(other, key=lambda v: order[id(v)])
        conflicts.append(
            ValueConflict(
                subject=lead.subject,
                target=target,
                evidence_ids=(lead.evidence.evidence_id, second.evidence.evidence_id),
                values=(lead.spelled(), second.spelled()),
                majority=majority,
                dissenting=tuple(vote.evidence.evidence_id for vote in other),
            )
        )
    return conflicts
