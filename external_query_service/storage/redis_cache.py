"""The shared cache in Redis (``[cache] url``): response entries, page analyses, fetch
leases and server sessions that every process with the same URL and key prefix sees.

Values are bytes the callers encoded as JSON (plus raw bodies): nothing read from Redis is
ever unpickled or executed, so a shared cache is not a way to run code in its readers.

Each bounded map (``RedisEntries``: responses, analyses) is a namespace of the key prefix:
one hash per entry (``m`` metadata, ``b`` body) that expires with its time to live, a
sorted set of last use (a counter, so every process agrees on the order), a hash of sizes
and their total; Lua scripts update them together, and a write evicts the least recently
used entries until the total is back under the bound.

Redis is an optimisation, never a dependency of an answer: every operation has short socket
timeouts (``[cache] redis_timeout_s``); a failure is counted (``RedisLink.errors``, and the
callbacks of ``on_error``), logged as a warning at most once a minute, and for
``[cache] redis_retry_s`` afterwards the link answers "missing" at once without trying, so
callers fetch directly.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from ..errors import InputError
from ..memo import SharedMemo
from ..settings import CacheSettings

__all__ = [
    "ANALYSIS_TTL_S",
    "WARNING_INTERVAL_S",
    "RedisEntries",
    "RedisLink",
    "RedisMemo",
    "RedisValues",
    "SharedCache",
    "open_shared_cache",
]

_log = logging.getLogger(__name__)
_T = TypeVar("_T")

#: A Redis failure is logged at most this often per process (each one is counted).
WARNING_INTERVAL_S = 60.0
#: How long a page analysis is kept in Redis at most (it never goes stale: it is a pure
#: function of the body and the query; the byte bound usually evicts it first).
ANALYSIS_TTL_S = 86_400.0

#: Lua: drop the entry ARGV[1] (its hash, its place in the last-use order, its size).
_FORGET = """
local old = redis.call('HGET', KEYS[3], ARGV[1])
redis.call('DEL', KEYS[1])
if old then
  redis.call('HDEL', KEYS[3], ARGV[1])
  redis.call('ZREM', KEYS[2], ARGV[1])
  redis.call('DECRBY', KEYS[4], old)
end
"""

_PUT = (
    _FORGET
    + """
local size = tonumber(ARGV[4])
local bound = tonumber(ARGV[6])
if size > bound then return 0 end
redis.call('HSET', KEYS[1], 'm', ARGV[2], 'b', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
redis.call('ZADD', KEYS[2], redis.call('INCR', KEYS[5]), ARGV[1])
redis.call('HSET', KEYS[3], ARGV[1], size)
local total = redis.call('INCRBY', KEYS[4], size)
while total > bound do
  local oldest = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
  if not oldest then break end
  local gone = redis.call('HGET', KEYS[3], oldest) or '0'
  redis.call('ZREM', KEYS[2], oldest)
  redis.call('HDEL', KEYS[3], oldest)
  redis.call('DEL', ARGV[7] .. oldest)
  total = redis.call('DECRBY', KEYS[4], gone)
end
return redis.call('EXISTS', KEYS[1])
"""
)

#: An entry gone (expired) or half there is forgotten; a found one becomes the most recent.
_GET = (
    """
local found = redis.call('HMGET', KEYS[1], 'm', 'b')
if not found[1] or not found[2] then
"""
    + _FORGET
    + """
  return false
end
redis.call('ZADD', KEYS[2], redis.call('INCR', KEYS[5]), ARGV[1])
return found
"""
)

_DELETE = (
    _FORGET
    + """
return 1
"""
)

_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


class RedisLink:
    """One Redis client (a thread-safe connection pool) with its failure rule: short
    timeouts, failures counted and logged (rate limited), then a pause before trying again."""

    def __init__(self, settings: CacheSettings) -> None:
        if settings.url is None:
            raise InputError("[cache] url is not set")
        try:  # imported here: a service without [cache] url never loads the client
            import redis
            from redis.backoff import NoBackoff
            from redis.retry import Retry
        except ImportError:  # pragma: no cover - the [redis] extra is missing
            raise InputError(
                "[cache] url needs the Redis client: pip install 'external_query_service[redis]'"
            ) from None
        self._failures: tuple[type[BaseException], ...] = (redis.RedisError, OSError)
        self.settings = settings
        self.prefix = settings.key_prefix
        self.client: Any = redis.Redis.from_url(
            settings.url,
            socket_timeout=settings.redis_timeout_s,
            socket_connect_timeout=settings.redis_timeout_s,
            retry=Retry(NoBackoff(), 0),
            health_check_interval=0,
        )
        #: Operations that failed since the link was made.
        self.errors = 0
        self._listeners: list[Callable[[], None]] = []
        self._lock = threading.Lock()
        self._pause_until = 0.0
        self._warned_at = -WARNING_INTERVAL_S
        #: The Lua scripts (EVALSHA, loaded on first use) of ``RedisEntries``.
        self.put_entry = self.client.register_script(_PUT)
        self.get_entry = self.client.register_script(_GET)
        self.delete_entry = self.client.register_script(_DELETE)
        self.release_lease = self.client.register_script(_RELEASE)

    def on_error(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` on every failed operation (a metric counts them)."""
        self._listeners.append(callback)

    def call(self, what: str, operation: Callable[[Any], _T], default: _T) -> _T:
        """``operation(client)``, or ``default`` when Redis fails or is paused after a
        failure."""
        if time.monotonic() < self._pause_until:
            return default
        try:
            return operation(self.client)
        except self._failures as exc:
            self._failed(what, exc)
            return default

    def _failed(self, what: str, exc: BaseException) -> None:
        now = time.monotonic()
        with self._lock:
            self.errors += 1
            self._pause_until = now + self.settings.redis_retry_s
            warn = now - self._warned_at >= WARNING_INTERVAL_S
            if warn:
                self._warned_at = now
        for callback in self._listeners:
            callback()
        if warn:
            _log.warning(
                "shared cache unavailable (%s: %s): fetching directly for %g s",
                what,
                f"{type(exc).__name__}: {exc}"[:200],
                self.settings.redis_retry_s,
            )

    def ping(self) -> str | None:
        """None when Redis answers now (whatever the pause says), else why not."""
        try:
            self.client.ping()
        except self._failures as exc:
            self._failed("ping", exc)
            return f"{type(exc).__name__}: {exc}"[:200]
        self._pause_until = 0.0
        return None

    def close(self) -> None:
        """Close the connection pool."""
        self.client.close()


class RedisEntries:
    """A byte-bounded map of entries (metadata bytes and a body) in one namespace of the
    link's prefix, least recently used out; also the leases of ``SharedStore``."""

    def __init__(self, link: RedisLink, namespace: str, max_bytes: int) -> None:
        self._link = link
        self.max_bytes = max_bytes
        base = f"{link.prefix}{namespace}:"
        self._entry = base + "e:"
        self._lease = base + "l:"
        self._keys = [base + "lru", base + "size", base + "total", base + "tick"]

    def _script_keys(self, key: str) -> list[str]:
        return [self._entry + key, *self._keys]

    def get(self, key: str) -> tuple[bytes, bytes] | None:
        """The metadata and body under ``key`` (marked as just used), or None."""
        found = self._link.call(
            "get", lambda _c: self._link.get_entry(keys=self._script_keys(key), args=[key]), None
        )
        if not found:
            return None
        meta, body = found
        return bytes(meta), bytes(body)

    def put(self, key: str, meta: bytes, body: bytes, *, ttl_s: float) -> bool:
        """Keep an entry for ``ttl_s`` (its size: body plus metadata); False when it alone
        exceeds the bound or Redis fails."""
        ttl_ms = max(1, round(ttl_s * 1000))
        args: list[bytes | str | int] = [
            key,
            meta,
            body,
            len(body) + len(meta),
            ttl_ms,
            self.max_bytes,
            self._entry,
        ]
        kept = self._link.call(
            "put",
            lambda _c: self._link.put_entry(keys=self._script_keys(key), args=args),
            0,
        )
        return bool(kept)

    def delete(self, key: str) -> None:
        """Drop the entry under ``key``."""
        self._link.call(
            "delete", lambda _c: self._link.delete_entry(keys=self._script_keys(key), args=[key]), 0
        )

    def claim(self, name: str, ttl_s: float) -> str | None:
        """Take the lease ``name`` (SET NX PX): a token, ``""`` when Redis fails, None while
        another holds it."""
        token = secrets.token_hex(8)
        ttl_ms = max(1, round(ttl_s * 1000))
        taken = self._link.call(
            "claim", lambda c: c.set(self._lease + name, token, nx=True, px=ttl_ms), ""
        )
        if taken == "":
            return ""
        return token if taken else None

    def claimed(self, name: str) -> bool:
        """True while someone holds the lease ``name``."""
        return bool(self._link.call("claimed", lambda c: c.exists(self._lease + name), 0))

    def release(self, name: str, token: str) -> None:
        """Give the lease back if ``token`` still holds it (it may have expired)."""
        self._link.call(
            "release",
            lambda _c: self._link.release_lease(keys=[self._lease + name], args=[token]),
            0,
        )

    def total(self) -> int:
        """Bytes held, as accounted (entries expired but not yet noticed count until they
        are)."""
        value = self._link.call("total", lambda c: c.get(self._keys[2]), None)
        return int(value or 0)

    def count(self) -> int:
        """Entries held (expired ones not yet noticed included)."""
        return int(self._link.call("count", lambda c: c.zcard(self._keys[0]), 0))

    def clear(self) -> None:
        """Drop every entry and lease of this namespace."""

        def drop(client: Any) -> None:
            for pattern in (self._entry + "*", self._lease + "*"):
                for found in client.scan_iter(match=pattern, count=500):
                    client.delete(found)
            client.delete(*self._keys)

        self._link.call("clear", drop, None)


class RedisMemo(SharedMemo):
    """A ``SharedMemo`` over ``RedisEntries``: values become bytes with ``encode`` (None:
    not kept) and come back with ``decode``; entries live at most ``ttl_s``."""

    def __init__(
        self,
        entries: RedisEntries,
        *,
        encode: Callable[[Any], bytes | None],
        decode: Callable[[bytes], Any],
        ttl_s: float,
    ) -> None:
        self._entries = entries
        self._encode = encode
        self._decode = decode
        self._ttl_s = ttl_s

    def get(self, key: str) -> Any | None:
        """The value kept under ``key``; None when missing or unreadable (then dropped)."""
        found = self._entries.get(key)
        if found is None:
            return None
        try:
            return self._decode(found[1])
        except (ValueError, KeyError, TypeError):
            self._entries.delete(key)
            return None

    def put(self, key: str, value: Any) -> None:
        """Keep ``value`` if it can be encoded."""
        data = self._encode(value)
        if data is not None:
            self._entries.put(key, b"", data, ttl_s=self._ttl_s)


class RedisValues:
    """Small values with an idle timeout (server sessions), under ``<prefix>value:``."""

    def __init__(self, link: RedisLink) -> None:
        self._link = link
        self._base = f"{link.prefix}value:"

    def set(self, key: str, value: bytes, ttl_s: float) -> bool:
        """Keep ``value`` for ``ttl_s``; False when Redis fails."""
        ttl_ms = max(1, round(ttl_s * 1000))
        return bool(self._link.call("set", lambda c: c.set(self._base + key, value, px=ttl_ms), 0))

    def get(self, key: str, ttl_s: float) -> bytes | None:
        """The value (its time to live restarted at ``ttl_s``), or None."""
        ttl_ms = max(1, round(ttl_s * 1000))
        found = self._link.call("get", lambda c: c.getex(self._base + key, px=ttl_ms), None)
        return None if found is None else bytes(found)


class SharedCache:
    """What ``[cache] url`` gives a service: the response entries (``max_bytes``), page
    analyses (``analysis_max_bytes``) and small values, over one ``RedisLink``."""

    def __init__(self, settings: CacheSettings) -> None:
        self.link = RedisLink(settings)
        self.responses = RedisEntries(self.link, "http", settings.max_bytes)
        self.analyses = RedisEntries(self.link, "analysis", settings.analysis_max_bytes)
        self.values = RedisValues(self.link)

    @property
    def errors(self) -> int:
        """Failed Redis operations so far (this process)."""
        return self.link.errors

    def ping(self) -> str | None:
        """None when Redis answers now, else why not."""
        return self.link.ping()

    def clear(self) -> None:
        """Drop every response entry, analysis and lease (values stay)."""
        self.responses.clear()
        self.analyses.clear()

    def close(self) -> None:
        """Close the connection pool."""
        self.link.close()


def open_shared_cache(settings: CacheSettings) -> SharedCache | None:
    """The shared cache ``[cache] url`` names (no connection is made yet), or None without
    one. With ``enabled`` false it still holds server sessions, and nothing else."""
    if settings.url is None:
        return None
    return SharedCache(settings)
