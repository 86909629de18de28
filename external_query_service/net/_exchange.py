"""One HTTP exchange under the response cache: the path every cached request takes.

The page fetcher (each redirect hop) and the trusted endpoints (each API call) differ in
how they send a request and judge its answer, and not at all in how a kept reply is used:
look the entry up once, replay it while fresh, else send the request with its validators,
take a 304 as the kept body confirmed, and keep what came back.
``CachedExchange.request`` is that path, written once; the caller passes only its own
wire step (``Send``).

``CachedExchange.once`` is the other half both share: identical requests in flight at
once go out once in this process (``SingleFlight``) and, with a shared cache, once across
the processes sharing it (``ResponseCache.single_flight``).

A replayed reply comes back with ``kept=True``; a caller that must judge the network
policy first (the page fetcher) does so before it uses one.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable
from functools import partial
from typing import NamedTuple, TypeVar

import httpx

from .._clock import Clock
from .._memo import SingleFlight
from ._cache import CacheKey, HttpExchange, ResponseCache

__all__ = ["CachedExchange", "Received", "Send"]

_T = TypeVar("_T")


class Received(NamedTuple):
    """What one request brought back: the answer's headers (for the caching rules) and the
    reply as kept, or None for a 304 that answered the conditional request."""

    headers: httpx.Headers
    reply: HttpExchange | None


#: Sends the request with these extra headers (the validators; empty for a plain
#: request) and reads the answer. Its failures are the caller's, raised as they are.
Send = Callable[[dict[str, str]], Awaitable[Received]]


class CachedExchange:
    """Requests under ``cache`` (None: nothing kept, every request goes out), timed by
    ``clock`` (the round trip RFC 9111 adds to a reply's age)."""

    def __init__(self, cache: ResponseCache | None, clock: Clock) -> None:
        self.cache = cache
        self._clock = clock
        self._flights = SingleFlight()

    async def fresh(self, key: CacheKey) -> HttpExchange | None:
        """The kept reply for ``key`` while it may be used without asking the origin."""
        return await self.cache.afresh(key) if self.cache is not None else None

    async def request(self, key: CacheKey | None, send: Send) -> HttpExchange:
        """The reply for ``key``: kept and fresh, confirmed by a 304, or new (and kept when
        its headers allow). ``key`` None: not cacheable (a POST), ``send`` as it is.

        The entry is looked up once for both uses (one round trip to a shared store)."""
        cache = self.cache
        if cache is None or key is None:
            return _sent(await send({}))
        entry = await cache.alookup(key)
        kept = cache.reuse(key, entry)
        if kept is not None:
            return kept
        requested_at = self._clock().timestamp()
        received = await send(entry.validators() if entry is not None else {})
        if received.reply is None:
            assert entry is not None  # a 304 only ever answers the validators we sent
            return await cache.arevalidated(key, entry, received.headers)
        await cache.astore(key, received.reply, received.headers, requested_at=requested_at)
        return received.reply

    async def once(
        self,
        flight: Hashable,
        fetch: Callable[[], Awaitable[_T]],
        *,
        key: CacheKey | None = None,
        kept: Callable[[], Awaitable[_T | None]] | None = None,
    ) -> _T:
        """``fetch()`` once for everyone asking for ``flight`` at the same moment in this
        process. With a shared cache, a ``key`` and ``kept``, once across the processes
        sharing it too: the others wait for ``kept()``, what the fetching one keeps under
        ``key`` (``ResponseCache.single_flight``)."""
        cache = self.cache
        if cache is None or not cache.shared or key is None or kept is None:
            return await self._flights.run(flight, fetch)
        return await self._flights.run(flight, partial(cache.single_flight, key, fetch, kept))


def _sent(received: Received) -> HttpExchange:
    """The reply of a request sent without validators (so never a revalidation)."""
    assert received.reply is not None
    return received.reply
