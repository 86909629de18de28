"""The shared cache in Redis (``[cache] url``): response entries, page analyses, fetch
leases and server sessions that every process with the same URL and key prefix sees.

Values are bytes the callers encoded as JSON (plus raw bodies): nothing read from Redis is
ever unpickled or executed, so a shared cache is not a way to run code in its readers.

Each bounded map (``RedisEntries``: responses, analyses) is a namespace of the key prefix:
one hash per entry (``m`` metadata, ``b`` body) that expires with its time to live, a
sorted set of last use (a counter, so every process agrees on the order), a hash of sizes
and their total; Lua scripts update them together, and a write evicts the least recently
used entries until the total is back under the bound.

With ``[cache] signing_key_env`` every value is sealed (``signing.py``): an HMAC-SHA256 tag
over its bytes and its Redis key is stored in front of it (entries: of the metadata and
body; analyses, sessions: of the value; leases: of the token), and Redis key names are
keyed digests of the callers' names. A value that does not verify is deleted, counted
(``RedisLink.rejected``, the callbacks of ``on_reject``), logged at most once a minute, and
read as missing, so the page is fetched (or the analysis computed) again. Without a key
values are stored as they are, as before.

Redis is an optimisation, never a dependency of an answer: every operation has short socket
timeouts (``[cache] redis_timeout_s``), and ``SLOW_STREAK`` replies in a row slower than
``[cache] redis_slow_s`` count as a failure too; a failure is counted (``RedisLink.errors``, and the
callbacks of ``on_error``), logged as a warning at most once a minute, and for
``[cache] redis_retry_s`` afterwards the link answers "missing" at once without trying, so
callers fetch directly.
"""

from __future__ import annotations

import logging
import os
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, TypeVar

from .._memo import SharedMemo
from ..errors import InputError
from ..settings import CacheSettings
from ._signing import TAG_BYTES, EntrySigner, entry_signer

__all__ = [
    "ANALYSIS_TTL_S",
    "SLOW_STREAK",
    "WARNING_INTERVAL_S",
    "RedisEntries",
    "RedisLink",
    "RedisMemo",
    "RedisValues",
    "SharedCache",
    "open_shared_cache",
]

_log = logging.getLogger("external_query_service.storage")
_T = TypeVar("_T")

#: A Redis failure is logged at most this often per process (each one is counted).
WARNING_INTERVAL_S = 60.0
#: Replies in a row slower than ``[cache] redis_slow_s`` that count as one failure.
SLOW_STREAK = 3
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

    def __init__(self, settings: CacheSettings, signer: EntrySigner | None = None) -> None:
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
        #: Seals and opens values (None: values are stored unsigned).
        self.signer = signer
        #: Values dropped since the link was made because their tag did not verify.
        self.rejected = 0
        self._listeners: list[Callable[[], None]] = []
        self._reject_listeners: list[Callable[[], None]] = []
        self._lock = threading.Lock()
        self._pause_until = 0.0
        self._warned_at = -WARNING_INTERVAL_S
        self._reject_warned_at = -WARNING_INTERVAL_S
        self._slow_streak = 0  # replies in a row slower than ``redis_slow_s``
        #: The Lua scripts (EVALSHA, loaded on first use) of ``RedisEntries``.
        self.put_entry = self.client.register_script(_PUT)
        self.get_entry = self.client.register_script(_GET)
        self.delete_entry = self.client.register_script(_DELETE)
        self.release_lease = self.client.register_script(_RELEASE)

    def on_error(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` on every failed operation (a metric counts them)."""
        self._listeners.append(callback)

    def on_reject(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` on every value dropped for a tag that does not verify."""
        self._reject_listeners.append(callback)

    def names(self, name: str) -> tuple[str, ...]:
        """The Redis key names ``name`` may live under: itself when unsigned, else the
        signer's keyed digests (the current key's first; that one is where writes go)."""
        return (name,) if self.signer is None else self.signer.names(name)

    def seal(self, key: str, *parts: bytes) -> bytes:
        """The tag to store in front of ``parts`` under ``key`` (empty when unsigned)."""
        return b"" if self.signer is None else self.signer.seal(key, *parts)

    def opened(self, key: str, sealed: bytes, *rest: bytes) -> bytes | None:
        """``sealed`` without its tag when the tag seals it (and ``rest``) under ``key``;
        None (counted and logged as a rejection) when it does not. Unsigned: as it is."""
        if self.signer is None:
            return sealed
        tag, value = sealed[:TAG_BYTES], sealed[TAG_BYTES:]
        if len(tag) == TAG_BYTES and self.signer.opens(key, tag, value, *rest):
            return value
        self._rejected(key)
        return None

    def _rejected(self, key: str) -> None:
        now = time.monotonic()
        with self._lock:
            self.rejected += 1
            warn = now - self._reject_warned_at >= WARNING_INTERVAL_S
            if warn:
                self._reject_warned_at = now
        for callback in self._reject_listeners:
            callback()
        if warn:
            _log.warning(
                "shared cache entry %s refused: its signature does not verify (forged, "
                "or signed with another key); fetching again",
                key[:120],
            )

    def call(self, what: str, operation: Callable[[Any], _T], default: _T) -> _T:
        """``operation(client)``, or ``default`` when Redis fails or is paused after a
        failure."""
        began = time.monotonic()
        if began < self._pause_until:
            return default
        try:
            result = operation(self.client)
        except self._failures as exc:
            self._failed(what, exc)
            return default
        took = time.monotonic() - began
        self._slow_streak = self._slow_streak + 1 if took > self.settings.redis_slow_s else 0
        if self._slow_streak >= SLOW_STREAK:
            # Answering, but too slowly: the replies are used, and Redis rests as after an
            # error. A streak, not one reply: one late reply on a busy machine is no pattern.
            self._slow_streak = 0
            self._failed(what, TimeoutError(f"{SLOW_STREAK} replies in a row over {took:.3f} s"))
        return result

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
        """The metadata and body under ``key`` (marked as just used), or None; an entry
        whose seal does not verify is deleted and read as None."""
        for name in self._link.names(key):
            found = self._link.call("get", partial(self._get_entry, name), None)
            if not found:
                continue
            body = bytes(found[1])
            meta = self._link.opened(self._entry + name, bytes(found[0]), body)
            if meta is None:
                self._drop(name)
                return None
            return meta, body
        return None

    def put(self, key: str, meta: bytes, body: bytes, *, ttl_s: float) -> bool:
        """Keep an entry for ``ttl_s`` (its size: body plus metadata); False when it alone
        exceeds the bound or Redis fails."""
        ttl_ms = max(1, round(ttl_s * 1000))
        name = self._link.names(key)[0]
        sealed = self._link.seal(self._entry + name, meta, body) + meta
        args: list[bytes | str | int] = [
            name,
            sealed,
            body,
            len(body) + len(sealed),
            ttl_ms,
            self.max_bytes,
            self._entry,
        ]
        kept = self._link.call(
            "put",
            lambda _c: self._link.put_entry(keys=self._script_keys(name), args=args),
            0,
        )
        return bool(kept)

    def delete(self, key: str) -> None:
        """Drop the entry under ``key`` (under every name it may live under)."""
        for name in self._link.names(key):
            self._drop(name)

    def _get_entry(self, name: str, _client: Any) -> Any:
        return self._link.get_entry(keys=self._script_keys(name), args=[name])

    def _drop(self, name: str) -> None:
        self._link.call(
            "delete",
            lambda _c: self._link.delete_entry(keys=self._script_keys(name), args=[name]),
            0,
        )

    def claim(self, name: str, ttl_s: float) -> str | None:
        """Take the lease ``name`` (SET NX PX): a token, ``""`` when Redis fails, None while
        another holds it."""
        key = self._lease + self._link.names(name)[0]
        nonce = secrets.token_hex(8).encode("ascii")
        token = (self._link.seal(key, nonce) + nonce).hex()
        ttl_ms = max(1, round(ttl_s * 1000))
        taken = self._link.call("claim", lambda c: c.set(key, token, nx=True, px=ttl_ms), "")
        if taken == "":
            return ""
        return token if taken else None

    def claimed(self, name: str) -> bool:
        """True while someone holds the lease ``name``. Signed: a lease whose token does
        not verify holds nothing (it is deleted), so a planted one cannot stall fetches."""
        key = self._lease + self._link.names(name)[0]
        if self._link.signer is None:
            return bool(self._link.call("claimed", lambda c: c.exists(key), 0))
        found = self._link.call("claimed", lambda c: c.get(key), None)
        if found is None:
            return False
        try:
            sealed = bytes.fromhex(bytes(found).decode("ascii"))
        except ValueError:
            sealed = b""
        if self._link.opened(key, sealed) is not None:
            return True
        self._link.call("claimed", lambda c: c.delete(key), 0)
        return False

    def release(self, name: str, token: str) -> None:
        """Give the lease back if ``token`` still holds it (it may have expired)."""
        key = self._lease + self._link.names(name)[0]
        self._link.call("release", lambda _c: self._link.release_lease(keys=[key], args=[token]), 0)

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
        """Keep ``value`` for ``ttl_s`` (sealed when signing); False when Redis fails."""
        ttl_ms = max(1, round(ttl_s * 1000))
        name = self._base + self._link.names(key)[0]
        sealed = self._link.seal(name, value) + value
        return bool(self._link.call("set", lambda c: c.set(name, sealed, px=ttl_ms), 0))

    def get(self, key: str, ttl_s: float) -> bytes | None:
        """The value (its time to live restarted at ``ttl_s``), or None; one whose seal
        does not verify is deleted and read as None."""
        ttl_ms = max(1, round(ttl_s * 1000))
        for name in (self._base + found for found in self._link.names(key)):
            kept: bytes | None = self._link.call("get", partial(_getex, name, ttl_ms), None)
            if kept is None:
                continue
            value = self._link.opened(name, bytes(kept))
            if value is None:
                self._link.call("delete", partial(_delete, name), 0)
            return value
        return None


def _getex(name: str, ttl_ms: int, client: Any) -> bytes | None:
    found: bytes | None = client.getex(name, px=ttl_ms)
    return found


def _delete(name: str, client: Any) -> int:
    return int(client.delete(name))


class SharedCache:
    """What ``[cache] url`` gives a service: the response entries (``max_bytes``), page
    analyses (``analysis_max_bytes``) and small values, over one ``RedisLink``."""

    def __init__(self, settings: CacheSettings, environ: Mapping[str, str] | None = None) -> None:
        """``environ`` (default ``os.environ``) holds the signing keys ``[cache]`` names;
        ``SettingsError`` when ``require_signing`` finds none."""
        signer = entry_signer(settings, os.environ if environ is None else environ)
        self.link = RedisLink(settings, signer)
        self.responses = RedisEntries(self.link, "http", settings.max_bytes)
        self.analyses = RedisEntries(self.link, "analysis", settings.analysis_max_bytes)
        self.values = RedisValues(self.link)

    @property
    def errors(self) -> int:
        """Failed Redis operations so far (this process)."""
        return self.link.errors

    @property
    def signed(self) -> bool:
        """True when every value is sealed (``[cache] signing_key_env`` gave a key)."""
        return self.link.signer is not None

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
