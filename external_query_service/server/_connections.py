"""Connections that cannot be held hostage: a deadline for each request's headers, and an
accept-error log that cannot flood the disk.

uvicorn closes a keep-alive connection idle after a response (``timeout_keep_alive``) and
refuses requests with 503 past ``limit_concurrency`` connections, but a connection that
never finishes its headers is kept for ever: a thousand such sockets from one client hold
every file descriptor, and each accept the kernel refuses then logs a traceback.
``HeaderDeadlineProtocol`` closes a connection whose next request's headers have not
arrived ``header_timeout_s`` after it opened or after its previous response, and when a new
connection brings the count to ``limit_concurrency`` it first closes the connection that has
waited longest for headers (as nginx reuses idle keep-alive connections), so idle sockets
never turn a real request away with 503.
``limit_accept_errors`` turns the event loop's "out of system resource" accept errors into
one line a minute with a count.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from uvicorn.config import Config
from uvicorn.protocols.http.h11_impl import H11Protocol, RequestResponseCycle

__all__ = [
    "ACCEPT_LOG_INTERVAL_S",
    "HeaderDeadlineProtocol",
    "configure_connections",
    "limit_accept_errors",
]

#: The accept-error log writes at most one line this often.
ACCEPT_LOG_INTERVAL_S = 60.0
_ACCEPT_FAILED = "socket.accept() out of system resource"
_HEADER_TIMEOUT = "external_query_header_timeout_s"
log = logging.getLogger("uvicorn.error")


def configure_connections(config: Config, *, header_timeout_s: float) -> None:
    """Serve ``config``'s connections with ``HeaderDeadlineProtocol``. The deadline rides on
    the config, which ``--workers`` hands to each worker process."""
    config.http = HeaderDeadlineProtocol
    setattr(config, _HEADER_TIMEOUT, header_timeout_s)


class HeaderDeadlineProtocol(H11Protocol):
    """uvicorn's h11 protocol, closing a connection whose request headers are late."""

    def __init__(self, config: Config, *args: Any, **kwargs: Any) -> None:
        super().__init__(config, *args, **kwargs)
        self._header_timeout_s: float = getattr(config, _HEADER_TIMEOUT, 10.0)
        self._header_timer: asyncio.TimerHandle | None = None
        self._waiting_after: RequestResponseCycle | None = None
        self._armed_at = 0.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()
        self._make_room()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._waiting_after = self.cycle
        self._armed_at = self.loop.time()
        self._header_timer = self.loop.call_later(self._header_timeout_s, self._headers_late)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _waiting_for_headers(self) -> bool:
        """Armed, no request begun since, and not already closing."""
        return (
            self._header_timer is not None
            and self.cycle is self._waiting_after
            and (self.cycle is None or self.cycle.response_complete)
            and not self.transport.is_closing()
        )

    def _make_room(self) -> None:
        """At ``limit_concurrency`` open connections uvicorn answers the next request with
        503; close the longest-waiting idle ones (never this one) until there is room. A
        connection already closing stays in uvicorn's count until the loop calls its
        ``connection_lost``, which it does before this connection's first bytes are read; so
        the room is counted over connections not yet closing, or a burst of accepts (each
        seeing the others' closes still pending) would close every idle connection."""
        limit = self.limit_concurrency
        connections = self.server_state.connections
        if limit is None or len(connections) < limit:
            return
        open_ = [other for other in connections if not _closing(other)]
        excess = len(open_) - limit + 1
        if excess <= 0:
            return
        idle = sorted(
            (
                other
                for other in open_
                if other is not self
                and isinstance(other, HeaderDeadlineProtocol)
                and other._waiting_for_headers()
            ),
            key=lambda other: other._armed_at,
        )
        for other in idle[:excess]:
            other._disarm()
            other.transport.close()

    def _headers_late(self) -> None:
        """No new request began since the timer was armed, and none is being answered."""
        self._header_timer = None
        idle = self.cycle is None or self.cycle.response_complete
        if idle and self.cycle is self._waiting_after and not self.transport.is_closing():
            self.transport.close()


def _closing(connection: object) -> bool:
    """Whether ``connection`` (any protocol uvicorn counts) has begun to close."""
    transport = getattr(connection, "transport", None)
    return transport is not None and transport.is_closing()


def limit_accept_errors(
    loop: asyncio.AbstractEventLoop, *, interval_s: float = ACCEPT_LOG_INTERVAL_S
) -> None:
    """Log ``loop``'s failed accepts (out of file descriptors, say) as one line per
    ``interval_s`` with how many failed; every other loop error goes where it went."""
    previous = loop.get_exception_handler()
    state = {"count": 0, "logged": -interval_s}

    def handle(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if context.get("message") != _ACCEPT_FAILED:
            if previous is not None:
                previous(loop, context)
            else:
                loop.default_exception_handler(context)
            return
        state["count"] += 1
        now = time.monotonic()
        if now - state["logged"] >= interval_s:
            error = context.get("exception")
            log.error(
                "could not accept %d connection(s) since the last report: %s",
                state["count"],
                getattr(error, "strerror", None) or error,
            )
            state["count"], state["logged"] = 0, now

    loop.set_exception_handler(handle)
