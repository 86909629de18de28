"""A per-host circuit breaker, so one failing host cannot drag a whole run down."""

from __future__ import annotations

import contextlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator

from ..errors import (
    BlockedDestination,
    FetchDeadlineExceeded,
    FetchError,
    UnsafeURL,
    UpstreamStatus,
)

__all__ = ["BREAKER_COOLDOWN_S", "BREAKER_HOSTS", "BREAKER_THRESHOLD", "CircuitBreaker"]

#: Consecutive failures (refused, timed out, 5xx or 429) after which a host is left alone,
#: and for how long before one probe may try it again: a host that keeps failing must not
#: cost every question its full timeout, nor be hammered while it is down.
BREAKER_THRESHOLD = 5
BREAKER_COOLDOWN_S = 30.0
#: Hosts with failures a breaker remembers, the most recently failed: search results name
#: ever new hosts, and one that failed and was never asked again must not be kept for the
#: service's life. A host forgotten starts afresh (closed), as a host never seen does.
BREAKER_HOSTS = 10_000


_HOST_FAILURES = frozenset(
    {"connect_failed", "protocol_error", "transport_error", "resolve_failed"}
)


def _host_failed(exc: BaseException) -> bool | None:
    """How a fetch outcome counts for the host's circuit: True a failure of the host, False
    an answer from it, None neither (a policy refusal or a cancellation says nothing)."""
    if isinstance(exc, UpstreamStatus):
        return exc.status >= 500 or exc.status == 429
    if isinstance(exc, UnsafeURL | BlockedDestination):
        return None
    if isinstance(exc, FetchDeadlineExceeded):
        return True
    if isinstance(exc, FetchError):
        return exc.reason in _HOST_FAILURES
    return None


class CircuitBreaker:
    """Per-host circuit breaker: closed → open after ``threshold`` consecutive failures →
    after ``cooldown_s`` one half-open probe → closed on an answer, open again on a failure.

    While open, calls fail at once with ``FetchError(reason="circuit_open")`` without
    connecting. Plain state under a lock (no asyncio objects), so one breaker serves every
    event loop; ``clock`` is injectable so tests never wait.
    """

    def __init__(
        self,
        *,
        threshold: int = BREAKER_THRESHOLD,
        max_hosts: int = BREAKER_HOSTS,
        cooldown_s: float = BREAKER_COOLDOWN_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._threshold = threshold
        self._cooldown = cooldown_s
        self._clock = clock
        self._lock = threading.Lock()
        self._max_hosts = max_hosts
        self._failures: OrderedDict[str, int] = OrderedDict()  # least recently failed first
        self._opened: dict[str, float] = {}
        self._probing: set[str] = set()

    def is_open(self, host: str) -> bool:
        """Whether ``host`` is refused right now."""
        with self._lock:
            return host in self._opened

    @contextlib.contextmanager
    def guard(self, host: str, url: str) -> Iterator[None]:
        """Run one call to ``host``; refuse it while the circuit is open."""
        with self._lock:
            opened = self._opened.get(host)
            if opened is not None:
                waited = self._clock() - opened
                if host in self._probing or waited < self._cooldown:
                    raise FetchError(
                        url,
                        f"{host} failed {self._failures.get(host, 0)} times in a row; "
                        f"not tried again before {self._cooldown:g}s have passed",
                        reason="circuit_open",
                    )
                self._probing.add(host)  # half-open: this call is the probe
        try:
            yield
        except BaseException as exc:
            self._record(host, _host_failed(exc))
            raise
        self._record(host, False)

    def _record(self, host: str, failed: bool | None) -> None:
        with self._lock:
            self._probing.discard(host)
            if failed is None:
                return
            if not failed:
                self._failures.pop(host, None)
                self._opened.pop(host, None)
                return
            count = self._failures[host] = self._failures.get(host, 0) + 1
            self._failures.move_to_end(host)
            if count >= self._threshold:
                self._opened[host] = self._clock()
            while len(self._failures) > self._max_hosts:
                forgotten, _ = self._failures.popitem(last=False)
                self._opened.pop(forgotten, None)

    def remembered(self) -> int:
        """How many hosts with failures the breaker remembers (at most ``max_hosts``)."""
        with self._lock:
            return len(self._failures)
