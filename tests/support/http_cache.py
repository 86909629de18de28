"""What the response-cache tests share: a clock they move by hand, the loopback network,
and pages sent with the caching headers a test gives."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from external_query_service.settings import NetworkSettings
from external_query_service.testing import LoopbackServer, Reply

#: Where a ``Clock`` starts.
START = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)


class Clock:
    """A clock the test moves (from ``START``), so no test sleeps for an entry to age."""

    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def network(**overrides: Any) -> NetworkSettings:
    """The loopback network, with ``site-a.test`` resolving to it (``overrides`` replace
    settings)."""
    values: dict[str, Any] = {
        "allowed_networks": ["127.0.0.1/32"],
        "resolve": {"site-a.test": "127.0.0.1"},
        "timeout_s": 5.0,
    }
    values.update(overrides)
    return NetworkSettings(**values)


def url(server: LoopbackServer, path: str, host: str = "site-a.test") -> str:
    """``path`` on ``server`` as ``host`` names it."""
    return f"http://{host}:{server.port}{path}"


def page(body: str, **headers: str) -> Reply:
    """A one-paragraph HTML page sent with ``headers`` (``Cache-Control`` and the like)."""
    return Reply(body=f"<html><body><p>{body}</p></body></html>", headers=headers)
