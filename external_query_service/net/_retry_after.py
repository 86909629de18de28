"""``Retry-After``: how long a server asked us to wait, read one way for every caller.

The header comes in two forms (RFC 9110 §10.2.3): delay-seconds (``120``) or an HTTP
date (``Wed, 21 Oct 2026 07:28:00 GMT``). A date is turned into a wait against the
injected clock, never the wall clock, so a test that fixes "now" gets the same wait on
every run. Anything else (a negative or fractional number, a date without a zone, noise)
is no answer at all: the caller falls back to its own backoff.
"""

from __future__ import annotations

import email.utils

from .._clock import Clock

__all__ = ["MAX_RETRY_AFTER_S", "retry_after"]

#: The longest wait a Retry-After header is taken at its word for (a day); more is noise.
MAX_RETRY_AFTER_S = 86_400.0


def retry_after(value: str | None, clock: Clock) -> float | None:
    """Seconds ``value`` (a ``Retry-After`` header) asks to wait from ``clock()``'s now,
    at most ``MAX_RETRY_AFTER_S``; a date already past is 0. None when absent or
    unreadable."""
    text = (value or "").strip()
    if not text:
        return None
    if text.isascii() and text.isdigit():
        return min(float(text), MAX_RETRY_AFTER_S)
    try:
        moment = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if moment.tzinfo is None:
        return None
    wait = (moment - clock()).total_seconds()
    return min(max(wait, 0.0), MAX_RETRY_AFTER_S)
