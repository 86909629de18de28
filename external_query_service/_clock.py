"""Clocks. Every time check reads an injected clock, so tests can fix "now"."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from .errors import InputError

__all__ = ["Clock", "fixed_clock", "parse_now", "system_clock"]

#: Returns an aware datetime. Date-based checks use its own offset ("--now" carries one).
Clock = Callable[[], datetime]


def system_clock() -> datetime:
    """The current time in UTC (aware)."""
    return datetime.now(UTC)


def fixed_clock(moment: datetime) -> Clock:
    """A clock that always returns ``moment`` (which must carry an offset)."""
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError("a fixed clock needs an aware datetime (with an offset)")

    def clock() -> datetime:
        return moment

    return clock


def parse_now(text: str, flag: str = "--now") -> datetime:
    """The moment ``text`` spells as an ISO datetime with an offset (``--now`` and the
    like); anything else is an ``InputError`` naming ``flag``."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise InputError(f"{flag}: not an ISO datetime: {text!r}") from None
    if moment.utcoffset() is None:
        raise InputError(f"{flag} needs an offset (e.g. {text}+08:00)")
    return moment
