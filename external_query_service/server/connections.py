"""Connections that cannot be held hostage: a deadline for each request's headers, and an
accept-error log that cannot flood the disk.

uvicorn closes a keep-alive connection idle after a response (``timeout_keep_alive``) and
refuses requests with 503 past ``limit_concurrency`` connections, but a connection that
never finishes its headers is kept for ever: a thousand such sockets from one client hold
every file descriptor, and each accept the kernel refuses then logs a traceback.
``HeaderDeadlineProtocol`` closes a connection whose next request's headers have not
arrived ``header_timeout_s`` after it opened or after its previous response.
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

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

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
        self._header_timer = self.loop.call_later(self._header_timeout_s, self._headers_late)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_late(self) -> None:
        """No new request began since the timer was armed, and none is being answered."""
        self._header_timer = None
        idle = self.cycle is None or self.cycle.response_complete
        if idle and self.cycle is self._waiting_after and not self.transport.is_closing():
            self.transport.close()


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
