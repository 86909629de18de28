"""Is a piece of evidence from the right time? (The time rule in docs/architecture/overview.md.)

With a ``time_range``: evidence passes when a date it is about falls in the range, or when it
was published inside the range — so a forecast published the day before, about the target day,
passes. A fact API's carry-forward date (an exchange rate from the last working day) passes
when it is at most ``max_age_days`` before the range start, with an uncertainty for the
reader. Undated evidence cannot satisfy a time-bound question.

Without a range but with ``freshness_required``: evidence older than ``max_age_days`` before
today fails; undated evidence passes with an uncertainty.

"Today" is the local date of the ``now`` the caller passes in (its own offset); this module
never reads a clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime

from ..errors import InputError
from ..models import Evidence, ExternalQueryPlan, TimeRange
from ._notes import ReaderNote

__all__ = ["TimeVerdict", "check_time", "local_date"]


@dataclass(frozen=True, slots=True)
class TimeVerdict:
    """The time check for one evidence: a reason code, a detail, and any note for the reader."""

    passed: bool
    reason: str
    detail: str = ""
    note: ReaderNote | None = None


def local_date(now: datetime) -> date:
    """The calendar date of ``now`` at its own offset. ``now`` must be aware."""
    if now.tzinfo is None or now.utcoffset() is None:
        raise InputError("now must carry a UTC offset")
    return now.date()


def check_time(
    evidence: Evidence, plan: ExternalQueryPlan, *, today: date, max_age_days: int
) -> TimeVerdict:
    """Judge one evidence against the plan's time range or freshness requirement."""
    if plan.time_range is not None:
        return _check_range(evidence, plan.time_range, max_age_days=max_age_days)
    if plan.freshness_required:
        return _check_freshness(evidence, today=today, max_age_days=max_age_days)
    return TimeVerdict(True, "no_time_constraint")


def _check_range(evidence: Evidence, span: TimeRange, *, max_age_days: int) -> TimeVerdict:
    wanted = f"{span.start.isoformat()}..{span.end.isoformat()}"
    about = [day for day in evidence.about_dates if span.covers(day)]
    if about:
        return TimeVerdict(True, "ok", f"about {about[0].isoformat()} in {wanted}")
    if evidence.published_at is not None and span.covers(evidence.published_at):
        return TimeVerdict(True, "ok", f"published {evidence.published_at.isoformat()} in {wanted}")
    carried = _carried_forward_date(evidence, span, max_age_days=max_age_days)
    if carried is not None:
        return TimeVerdict(
            True,
            "carried_forward",
            f"about {carried.isoformat()}, {(span.start - carried).days} days before {wanted}",
            ReaderNote("carried_forward", carried),
        )
    if not evidence.about_dates and evidence.published_at is None:
        return TimeVerdict(False, "undated", f"no date to compare with {wanted}")
    return TimeVerdict(False, "out_of_time_range", f"{_dates_of(evidence)} outside {wanted}")


def _carried_forward_date(evidence: Evidence, span: TimeRange, *, max_age_days: int) -> date | None:
    """The latest about-date of a fact API within ``max_age_days`` before the range start."""
    if evidence.provider_type != "fact_api":
        return None
    earlier = [
        day
        for day in evidence.about_dates
        if day < span.start and (span.start - day).days <= max_age_days
    ]
    return max(earlier, default=None)


def _check_freshness(evidence: Evidence, *, today: date, max_age_days: int) -> TimeVerdict:
    reference = evidence.published_at or max(evidence.about_dates, default=None)
    if reference is None:
        return TimeVerdict(
            True, "undated_unchecked", "no date; freshness unknown", ReaderNote("undated")
        )
    age = (today - reference).days
    if age > max_age_days:
        return TimeVerdict(False, "stale", f"{reference.isoformat()} is {age} days old")
    return TimeVerdict(True, "ok", f"{reference.isoformat()} is {max(age, 0)} days old")


def _dates_of(evidence: Evidence) -> str:
    parts = [f"about {day.isoformat()}" for day in evidence.about_dates]
    if evidence.published_at is not None:
        parts.append(f"published {evidence.published_at.isoformat()}")
    return ", ".join(parts)
