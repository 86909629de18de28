"""Cache hits as events: where a kept reply or a kept page analysis is used again, the
component that used it says so at that moment, and a service fans it out to listeners.

``ResponseCache`` reports ``search``, ``api`` and ``page`` hits (the kind of caller the
reply was kept for) and the analysis memo ``analysis`` hits; the HTTP server's metrics
listen (``server/_metrics.py``). Counting happens in the components, never in a cache's
storage, so a shared storage behind the cache counts the same way.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Final

__all__ = ["CACHE_HIT_KINDS", "CacheHits", "HitListener"]

log = logging.getLogger("external_query_service.observability")

#: Every kind a hit is reported with.
CACHE_HIT_KINDS: Final = ("search", "api", "page", "analysis")

#: Called with the kind of each hit, on the thread the hit happened on; must be quick.
HitListener = Callable[[str], None]


class CacheHits:
    """Listeners of cache hits. ``hit(kind)`` tells each of them; a listener that raises is
    logged and the others are still told. Thread-safe."""

    def __init__(self) -> None:
        self._listeners: tuple[HitListener, ...] = ()
        self._lock = threading.Lock()

    def subscribe(self, listener: HitListener) -> Callable[[], None]:
        """Tell ``listener`` of every hit from now on; returns the call that stops it."""
        with self._lock:
            self._listeners = (*self._listeners, listener)

        def unsubscribe() -> None:
            with self._lock:
                kept = list(self._listeners)
                if listener in kept:
                    kept.remove(listener)
                self._listeners = tuple(kept)

        return unsubscribe

    def hit(self, kind: str) -> None:
        """One hit of ``kind`` (``CACHE_HIT_KINDS``), told to every listener."""
        for listener in self._listeners:  # a snapshot: (un)subscribing never blocks a hit
            try:
                listener(kind)
            except Exception:
                log.exception("cache hit listener failed")
