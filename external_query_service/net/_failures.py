"""What kind of failure a fetch error is, so an answer can say whether trying again helps."""

from __future__ import annotations

from ..errors import FetchError, UpstreamStatus
from ..models import FailureClass

__all__ = ["failure_class", "status_failure_class"]

# Reasons that mean the request as made is refused, or the endpoint is not the API it was
# configured as: asking again unchanged cannot help.
_MISCONFIGURED = frozenset(
    {
        "unsafe_url",
        "blocked_destination",
        "ca_bundle_invalid",
        "invalid_json",
        "unsupported_content",
    }
)


def status_failure_class(status: int) -> FailureClass:
    """A 4xx other than 408 (timeout), 425 (too early) and 429 (rate limit) refuses the request
    as made: ``misconfigured``. Anything else (5xx, those three) may pass later."""
    if 400 <= status < 500 and status not in (408, 425, 429):
        return "misconfigured"
    return "transient"


def failure_class(exc: FetchError) -> FailureClass:
    """``network`` when the name did not resolve, ``misconfigured`` for a refusal of the
    request as made, ``transient`` for everything that may pass (timeouts, resets, 5xx)."""
    if isinstance(exc, UpstreamStatus):
        return status_failure_class(exc.status)
    if exc.reason == "resolve_failed":
        return "network"
    if exc.reason in _MISCONFIGURED:
        return "misconfigured"
    return "transient"
