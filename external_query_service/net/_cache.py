"""The response cache: replies kept between questions, under HTTP's caching rules.

A subset of RFC 9111 for a cache that only ever sends anonymous GETs with a fixed set of
request headers per kind of caller (pages, API calls):

- not stored: ``no-store``, ``Vary: *``, statuses other than 200/203 and redirects,
  302/303/307 without explicit freshness, bodies a fetch refused (wrong type, too large);
- freshness lifetime: ``s-maxage`` (the cache is shared by every question of a service),
  else ``max-age``, else ``Expires`` − ``Date`` (− the time received when there is no
  valid ``Date``), else ``[cache] default_ttl_s`` (200, 203, 301 and 308 only); the first
  of repeated directives counts, and an unreadable one makes the reply stale at once;
- age: the ``Age`` header plus the request's round trip plus the time held here. ``Date``
  is not compared with our clock (origins' clocks drift, and tests fix ours), so a reply
  that sat in an upstream cache without an ``Age`` header looks younger than it is;
- ``private`` replies are stored: our requests carry no cookies or credentials, so a
  "private" answer is the one any of them would get;
- ``no-cache`` (with or without field names): stored only with a validator and revalidated
  before every use; a stale entry with ``ETag`` / ``Last-Modified`` is revalidated with
  ``If-None-Match`` / ``If-Modified-Since``, and a 304 refreshes it (headers merged as
  RFC 9111 §4.3.4 says) and reuses the stored body.

An entry is replayed as it was received: same body, digest and ``fetched_at`` (when it came
from the origin, or when the origin last confirmed it with a 304). The cache never judges
the network policy: callers check the policy before they use an entry (``fetch.py``).
Bounded by ``[cache] max_bytes`` (bodies plus a small overhead each), least recently used
out. Thread-safe; one cache may serve several runtimes, each checking its own policy.

Where entries live is pluggable, the rules above are not: this process's memory
(``SizedLRU``), or a ``SharedStore`` several processes use (Redis, ``[cache] url``), where an
entry is JSON metadata plus the raw body — never a pickle, so a shared cache cannot carry
code — kept at most until it goes stale (plus ``[cache] stale_keep_s`` when it has a
validator). With a shared store, ``single_flight`` makes one process fetch a URL while the
others wait for its reply (a lease of ``[cache] lease_s``).

Nothing shared blocks an event loop: with a shared store, the async callers use the
``a``-prefixed twins (``afresh``, ``alookup``, ``astore``, ``arevalidated``) and
``single_flight``, which make each round trip to the store in a worker thread; with
entries in memory they run inline (no thread hop for a dictionary lookup).

Every fresh reply served is a hit, told to ``on_hit`` with the kind of caller it was kept
for (the key's first part: ``page``, ``search`` or ``api``) as it happens
(``observability/_events.py``); a revalidated reply (a 304) is not counted as one.
"""

from __future__ import annotations

import asyncio
import email.utils
import hashlib
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any, Protocol, TypeVar

import httpx

from .._clock import Clock, system_clock
from .._memo import SharedStore, SizedLRU, held_bytes
from ..settings import CacheSettings

__all__ = [
    "ENTRY_OVERHEAD",
    "CacheEntries",
    "CacheKey",
    "CachedResponse",
    "HttpExchange",
    "MemoryEntries",
    "ResponseCache",
    "SharedEntries",
    "cache_rules",
    "decode_entry",
    "encode_entry",
    "response_cache",
    "shared_key",
]

_T = TypeVar("_T")
#: (caller kind, method, URL): what an entry is kept under.
CacheKey = tuple[str, str, str]

#: Bytes counted for an entry besides what it holds (its place in the map, the key).
ENTRY_OVERHEAD = 512

#: Replies kept when they state a freshness of their own (RFC 9111 §3).
_STORABLE = frozenset({200, 203, 301, 302, 303, 307, 308})
#: Those a default lifetime may be given to (heuristically cacheable, RFC 9110 §15.1).
_DEFAULT_FRESH = frozenset({200, 203, 301, 308})
#: The response headers an entry keeps, to recompute freshness after a 304.
_KEPT_HEADERS = ("cache-control", "expires", "date", "age", "etag", "last-modified", "vary")


@dataclass(frozen=True, slots=True)
class HttpExchange:
    """One HTTP response as a fetch keeps it: enough to replay it, nothing more."""

    url: str
    status: int
    content_type: str  # media type only, lower case
    charset: str | None
    body: bytes  # Content-Encoding undone; empty for a redirect
    fetched_at: datetime  # when it came from the origin (the service clock)
    location: str | None = None  # a redirect's Location, as sent
    connected_address: str | None = None
    #: True when this is a kept reply used again (not one that came in just now).
    kept: bool = False


@dataclass(frozen=True, slots=True)
class _Rules:
    """What a reply's headers say about keeping it."""

    storable: bool
    lifetime: float  # seconds of freshness from its generation
    age: float  # the Age header (0 when absent or unreadable)
    no_cache: bool  # must be revalidated before every use
    etag: str | None
    last_modified: str | None


@dataclass(frozen=True, slots=True)
class CachedResponse:
    """A kept reply and what is needed to judge and revalidate it."""

    exchange: HttpExchange
    headers: tuple[tuple[str, str], ...]  # the caching headers, lower-case names
    received: float  # seconds on the cache's clock when it arrived (or was confirmed)
    initial_age: float  # Age + round trip, when it arrived
    lifetime: float
    no_cache: bool
    etag: str | None
    last_modified: str | None

    def age(self, now: float) -> float:
        """Seconds since the response was generated, by the cache's clock (RFC 9111 age)."""
        return self.initial_age + max(0.0, now - self.received)

    def fresh(self, now: float) -> bool:
        """True while the response may be reused without asking the origin."""
        return not self.no_cache and self.lifetime > self.age(now)

    def validators(self) -> dict[str, str]:
        """Conditional request headers; empty when the reply had no validator."""
        headers = {}
        if self.etag is not None:
            headers["If-None-Match"] = self.etag
        if self.last_modified is not None:
            headers["If-Modified-Since"] = self.last_modified
        return headers


def _directives(values: list[str]) -> dict[str, str | None]:
    """Cache-Control directives, names lower case, first occurrence kept."""
    found: dict[str, str | None] = {}
    for value in values:
        for part in value.split(","):
            name, sep, argument = part.strip().partition("=")
            name = name.strip().lower()
            if name and name not in found:
                found[name] = argument.strip().strip('"') if sep else None
    return found


def _seconds(value: str | None) -> float | None:
    """A delta-seconds value; None when unreadable."""
    if value is None or not value.isdigit():
        return None
    return float(value)


def _http_date(value: str | None) -> float | None:
    if not value:
        return None
    try:
        parsed = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if parsed.tzinfo is None:
        return None
    return parsed.timestamp()


def cache_rules(
    status: int, headers: Mapping[str, str] | httpx.Headers, *, received: float, default_ttl: float
) -> _Rules:
    """What RFC 9111 (our subset, see the module docstring) says about keeping a reply."""
    if isinstance(headers, httpx.Headers):
        control = headers.get_list("cache-control")
    else:
        control = [headers["cache-control"]] if "cache-control" in headers else []
    directives = _directives(control)
    etag = headers.get("etag") or None
    last_modified = headers.get("last-modified") or None
    age = _seconds((headers.get("age") or "").strip()) or 0.0
    no_cache = "no-cache" in directives
    vary = {item.strip() for item in (headers.get("vary") or "").split(",")}
    storable = status in _STORABLE and "no-store" not in directives and "*" not in vary

    lifetime: float | None
    if "s-maxage" in directives:
        lifetime = _seconds(directives["s-maxage"]) or 0.0
    elif "max-age" in directives:
        lifetime = _seconds(directives["max-age"]) or 0.0
    elif headers.get("expires") is not None:
        expires = _http_date(headers.get("expires"))
        date = _http_date(headers.get("date"))
        lifetime = 0.0 if expires is None else max(0.0, expires - (date or received))
    elif status in _DEFAULT_FRESH:
        lifetime = default_ttl
    else:
        lifetime = None  # a 302/303/307 that says nothing: not kept
    if lifetime is None:
        storable = False
    lifetime = lifetime or 0.0
    has_validator = etag is not None or last_modified is not None
    if not has_validator and (no_cache or lifetime <= age):
        storable = False  # it could never be used
    return _Rules(storable, lifetime, age, no_cache, etag, last_modified)


def _kept(headers: Mapping[str, str] | httpx.Headers) -> tuple[tuple[str, str], ...]:
    if isinstance(headers, httpx.Headers):
        return tuple(
            (name, ", ".join(headers.get_list(name))) for name in _KEPT_HEADERS if name in headers
        )
    return tuple((name, headers[name]) for name in _KEPT_HEADERS if name in headers)


def _size(entry: CachedResponse) -> int:
    # What the entry's objects hold (body, headers, URL, the records themselves), not its
    # body's length alone.
    return held_bytes(entry) + ENTRY_OVERHEAD


def encode_entry(entry: CachedResponse) -> bytes:
    """``entry`` without its body, as UTF-8 JSON (``decode_entry`` reads it back)."""
    exchange = entry.exchange
    document = {
        "url": exchange.url,
        "status": exchange.status,
        "content_type": exchange.content_type,
        "charset": exchange.charset,
        "fetched_at": exchange.fetched_at.isoformat(),
        "location": exchange.location,
        "connected_address": exchange.connected_address,
        "headers": [list(pair) for pair in entry.headers],
        "received": entry.received,
        "initial_age": entry.initial_age,
        "lifetime": entry.lifetime,
        "no_cache": entry.no_cache,
        "etag": entry.etag,
        "last_modified": entry.last_modified,
    }
    return json.dumps(document, separators=(",", ":")).encode("utf-8")


def _optional(value: Any) -> str | None:
    return None if value is None else str(value)


def decode_entry(meta: bytes, body: bytes) -> CachedResponse:
    """The entry ``encode_entry`` wrote, with ``body``; ``ValueError``, ``KeyError`` or
    ``TypeError`` for anything else."""
    document: dict[str, Any] = json.loads(meta.decode("utf-8"))
    fetched_at = datetime.fromisoformat(str(document["fetched_at"]))
    if fetched_at.utcoffset() == timedelta(0):
        fetched_at = fetched_at.replace(tzinfo=UTC)
    exchange = HttpExchange(
        url=str(document["url"]),
        status=int(document["status"]),
        content_type=str(document["content_type"]),
        charset=_optional(document["charset"]),
        body=bytes(body),
        fetched_at=fetched_at,
        location=_optional(document["location"]),
        connected_address=_optional(document["connected_address"]),
    )
    return CachedResponse(
        exchange=exchange,
        headers=tuple((str(name), str(value)) for name, value in document["headers"]),
        received=float(document["received"]),
        initial_age=float(document["initial_age"]),
        lifetime=float(document["lifetime"]),
        no_cache=bool(document["no_cache"]),
        etag=_optional(document["etag"]),
        last_modified=_optional(document["last_modified"]),
    )


class CacheEntries(Protocol):
    """Where a ``ResponseCache`` keeps its entries (the rules stay in the cache)."""

    def get(self, key: CacheKey) -> CachedResponse | None:
        """The entry under ``key`` (now the most recently used), or None."""
        ...

    def put(self, key: CacheKey, entry: CachedResponse) -> bool:
        """Keep ``entry``; False when it is not kept."""
        ...

    def pop(self, key: CacheKey) -> None:
        """Drop the entry under ``key``, if any."""
        ...

    def total(self) -> int:
        """Bytes held (``memo.held_bytes`` of each entry plus ``ENTRY_OVERHEAD``)."""
        ...

    def __len__(self) -> int: ...


class MemoryEntries:
    """Entries in this process's memory, at most ``max_bytes``, least recently used out."""

    def __init__(self, max_bytes: int) -> None:
        self._entries: SizedLRU[CacheKey, CachedResponse] = SizedLRU(max_bytes, _size)

    def get(self, key: CacheKey) -> CachedResponse | None:
        """The entry under ``key``, or None."""
        return self._entries.get(key)

    def put(self, key: CacheKey, entry: CachedResponse) -> bool:
        """Keep ``entry`` (False when it alone exceeds the bound)."""
        return self._entries.put(key, entry)

    def pop(self, key: CacheKey) -> None:
        """Drop the entry under ``key``."""
        self._entries.pop(key)

    def total(self) -> int:
        """Bytes held."""
        return self._entries.total

    def __len__(self) -> int:
        return len(self._entries)


def shared_key(key: CacheKey) -> str:
    """The text key of a cache key in a shared store (a digest: URLs can be long)."""
    return hashlib.sha256("\n".join(key).encode("utf-8")).hexdigest()


class SharedEntries:
    """Entries in a ``SharedStore`` (bounded there), as JSON metadata plus the raw body.

    An entry is kept until it goes stale by the clock, plus ``stale_keep_s`` when it has a
    validator (to be revalidated); the store expires it then. An entry that cannot be read
    back is dropped and counts as missing.
    """

    def __init__(self, store: SharedStore, *, clock: Clock, stale_keep_s: float) -> None:
        self.store = store
        self._clock = clock
        self._stale_keep_s = stale_keep_s

    def get(self, key: CacheKey) -> CachedResponse | None:
        """The entry under ``key``, or None."""
        name = shared_key(key)
        found = self.store.get(name)
        if found is None:
            return None
        try:
            return decode_entry(*found)
        except (ValueError, KeyError, TypeError):
            self.store.delete(name)
            return None

    def put(self, key: CacheKey, entry: CachedResponse) -> bool:
        """Keep ``entry`` for as long as it can be used."""
        keep = entry.lifetime - entry.age(self._clock().timestamp())
        if entry.no_cache:
            keep = 0.0
        if entry.validators():
            keep = max(keep, 0.0) + self._stale_keep_s
        if keep <= 0:
            self.store.delete(shared_key(key))
            return False
        meta = encode_entry(entry)
        return self.store.put(shared_key(key), meta, entry.exchange.body, ttl_s=keep)

    def pop(self, key: CacheKey) -> None:
        """Drop the entry under ``key``."""
        self.store.delete(shared_key(key))

    def total(self) -> int:
        """Bytes held in the store."""
        return self.store.total()

    def __len__(self) -> int:
        return self.store.count()


#: How long a process waiting for another's fetch sleeps between looks, first and at most.
_POLL_FIRST_S = 0.01
_POLL_MAX_S = 0.2


class ResponseCache:
    """Replies kept by (caller kind, method, URL), under HTTP's caching rules.

    ``clock`` is the service's: entries age by it, and ``fetched_at`` is read from it.
    ``shared`` (optional) keeps the entries where other processes see them instead of in
    this process's memory, and lets ``single_flight`` coordinate fetches between them.
    ``on_hit`` (optional) is told the kind of every hit when it happens.
    """

    def __init__(
        self,
        settings: CacheSettings | None = None,
        *,
        clock: Clock = system_clock,
        shared: SharedStore | None = None,
        on_hit: Callable[[str], None] | None = None,
    ):
        self.settings = settings or CacheSettings()
        self._clock = clock
        self._shared = shared
        self._on_hit = on_hit
        self._entries: CacheEntries = (
            SharedEntries(shared, clock=clock, stale_keep_s=self.settings.stale_keep_s)
            if shared is not None
            else MemoryEntries(self.settings.max_bytes)
        )
        #: Counters since the cache was made (reads served fresh, revalidated, stored).
        self.hits = 0
        self.revalidations = 0
        self.stored = 0

    def now(self) -> datetime:
        """The cache's clock, in seconds."""
        return self._clock()

    @property
    def size(self) -> int:
        """Bytes held (bodies plus the per-entry overhead)."""
        return self._entries.total()

    @property
    def shared(self) -> bool:
        """True when the entries live in a store other processes share."""
        return self._shared is not None

    async def single_flight(
        self,
        key: CacheKey,
        fetch: Callable[[], Awaitable[_T]],
        kept: Callable[[], Awaitable[_T | None]],
    ) -> _T:
        """``fetch()`` for ``key`` once across the processes sharing the store.

        The process that takes the lease fetches (and stores) and then gives it back; the
        others look for the reply with ``kept()`` after short, growing pauses, until it
        appears, or the lease is gone — given back without a storable reply, or expired
        with its holder — and they try to take it themselves. Without a shared store (or
        when it cannot be reached) this is just ``fetch()``. Callers bound the wait with
        their own deadline.
        """
        store = self._shared
        if store is None:
            return await fetch()
        lease = "lease:" + shared_key(key)
        while True:
            token = await asyncio.to_thread(store.claim, lease, self.settings.lease_s)
            if token is not None:
                try:
                    return await fetch()
                finally:
                    if token:
                        await asyncio.to_thread(store.release, lease, token)
            pause = _POLL_FIRST_S
            while True:
                await asyncio.sleep(pause)
                pause = min(pause * 2, _POLL_MAX_S)
                found = await kept()
                if found is not None:
                    return found
                if not await asyncio.to_thread(store.claimed, lease):
                    break

    async def _off_loop(self, function: Callable[..., _T], *args: Any) -> _T:
        """``function(*args)`` in a worker thread when it may reach a shared store (a round
        trip must not hold the event loop), inline when the entries are in memory."""
        if self._shared is None:
            return function(*args)
        return await asyncio.to_thread(function, *args)

    async def alookup(self, key: CacheKey) -> CachedResponse | None:
        """``lookup`` for async callers: the store's round trip off the event loop."""
        return await self._off_loop(self.lookup, key)

    async def afresh(self, key: CacheKey) -> HttpExchange | None:
        """``fresh`` for async callers: the store's round trip off the event loop."""
        return await self._off_loop(self.fresh, key)

    async def astore(
        self, key: CacheKey, exchange: HttpExchange, headers: httpx.Headers, *, requested_at: float
    ) -> None:
        """``store`` for async callers: the store's round trip off the event loop."""
        await self._off_loop(partial(self.store, requested_at=requested_at), key, exchange, headers)

    async def arevalidated(
        self, key: CacheKey, entry: CachedResponse, headers: httpx.Headers
    ) -> HttpExchange:
        """``revalidated`` for async callers: the store's round trip off the event loop."""
        return await self._off_loop(self.revalidated, key, entry, headers)

    def __len__(self) -> int:
        return len(self._entries)

    def lookup(self, key: CacheKey) -> CachedResponse | None:
        """The entry for ``key`` if it is fresh or can be revalidated; a stale entry without
        a validator is dropped."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry.fresh(self._clock().timestamp()) or entry.validators():
            return entry
        self._entries.pop(key)
        return None

    def fresh(self, key: CacheKey) -> HttpExchange | None:
        """The kept reply for ``key`` when it may be used without asking the origin."""
        return self.reuse(key, self.lookup(key))

    def reuse(self, key: CacheKey, entry: CachedResponse | None) -> HttpExchange | None:
        """``entry`` (what ``lookup(key)`` gave) as a kept reply when it may be used without
        asking the origin, counted as a hit; None when it must be revalidated first. A
        caller that needs the entry anyway (its validators) looks it up once, not twice."""
        if entry is None or not entry.fresh(self._clock().timestamp()):
            return None
        self.hits += 1
        if self._on_hit is not None:
            self._on_hit(key[0])
        return replace(entry.exchange, kept=True)

    def store(
        self,
        key: CacheKey,
        exchange: HttpExchange,
        headers: httpx.Headers,
        *,
        requested_at: float,
    ) -> None:
        """Keep ``exchange`` if its headers allow it (``requested_at``: when it was asked
        for, on the cache clock, for the round trip RFC 9111 adds to its age)."""
        received = exchange.fetched_at.timestamp()
        rules = cache_rules(
            exchange.status, headers, received=received, default_ttl=self.settings.default_ttl_s
        )
        if not rules.storable:
            self._entries.pop(key)  # a newer reply that may not be kept replaces the old one
            return
        entry = CachedResponse(
            exchange=exchange,
            headers=_kept(headers),
            received=received,
            initial_age=rules.age + max(0.0, received - requested_at),
            lifetime=rules.lifetime,
            no_cache=rules.no_cache,
            etag=rules.etag,
            last_modified=rules.last_modified,
        )
        if self._entries.put(key, entry):
            self.stored += 1

    def revalidated(
        self, key: CacheKey, entry: CachedResponse, headers: httpx.Headers
    ) -> HttpExchange:
        """A 304 answered ``entry``'s conditional request: the stored body stands, confirmed
        now; its caching headers are updated from the 304's (RFC 9111 §4.3.4)."""
        self.revalidations += 1
        now = self._clock()
        merged = dict(entry.headers)
        merged.update(_kept(headers))
        exchange = replace(entry.exchange, fetched_at=now)
        rules = cache_rules(
            exchange.status,
            merged,
            received=now.timestamp(),
            default_ttl=self.settings.default_ttl_s,
        )
        if not rules.storable:
            self._entries.pop(key)
            return exchange
        refreshed = replace(
            entry,
            exchange=exchange,
            headers=tuple(merged.items()),
            received=now.timestamp(),
            initial_age=rules.age,
            lifetime=rules.lifetime,
            no_cache=rules.no_cache,
            etag=rules.etag,
            last_modified=rules.last_modified,
        )
        self._entries.put(key, refreshed)
        return exchange


def response_cache(
    settings: CacheSettings,
    clock: Clock = system_clock,
    shared: SharedStore | None = None,
    *,
    on_hit: Callable[[str], None] | None = None,
) -> ResponseCache | None:
    """The cache ``[cache]`` asks for (entries in ``shared`` when given; telling ``on_hit``
    of its hits): None when caching is off."""
    return (
        ResponseCache(settings, clock=clock, shared=shared, on_hit=on_hit)
        if settings.enabled
        else None
    )
