"""Who may call, and how often: API keys, a token bucket and a concurrency cap per key.

Keys come from ``[server] api_keys_env`` (an environment variable holding one or more keys,
comma-separated) and ``api_key_hashes`` (``"sha256:<hex>"`` digests, so the settings file
never holds a key). A request carries its key as ``Authorization: Bearer <key>`` or
``X-API-Key: <key>``; a missing or wrong one is 401 ``unauthorized`` with
``WWW-Authenticate: Bearer``. The key's SHA-256 digest is compared with every configured
digest in constant time (``hmac.compare_digest``), so neither the time taken nor any log,
metric or answer reveals a key. With no keys configured every route is open.

``/healthz`` and ``/readyz`` are always open, ``/metrics`` too when ``metrics_public`` is set
(or no keys are configured), ``/openapi.json``, ``/docs`` and ``/redoc`` while ``[server]
docs`` is on (they hold no secret), and so is any ``OPTIONS`` request (a CORS preflight
carries no key) and any path no route serves (it is 404 ``not_found``, key or not). Limits,
per key (per client address when no keys are configured):
``requests_per_minute`` is a token bucket with a burst equal to the rate, kept in Redis when
``[cache] url`` is set so that every worker spends from the same bucket; and
``max_concurrent_per_key`` requests in flight at once, counted in this process. Over either
is 429 (``rate_limited``, ``too_many_concurrent``) with ``Retry-After``. With a rate set,
every limited response carries ``X-RateLimit-Limit`` (the rate per minute, which is also the
burst), ``X-RateLimit-Remaining`` (whole requests left now) and ``X-RateLimit-Reset`` (whole
seconds until the bucket is full again). When Redis cannot be reached the bucket falls back
to this process's memory: a limit kept per worker beats refusing every caller.
"""

from __future__ import annotations

import asyncio
import hmac
import math
import os
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from fastapi import FastAPI
from starlette.datastructures import MutableHeaders
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .._digests import sha256_digest
from ..settings import ServerSettings
from ._errors import error_response

if TYPE_CHECKING:
    from ..storage._redis_cache import RedisLink

__all__ = [
    "DOCS_PATHS",
    "OPEN_PATHS",
    "AccessRules",
    "Guard",
    "KeyRing",
    "RedisBuckets",
    "Spent",
    "TokenBuckets",
    "document_access",
    "presented_key",
]

#: Routes anyone may call, keys or not.
OPEN_PATHS = frozenset({"/healthz", "/readyz"})
#: The OpenAPI document and its pages, open while ``[server] docs`` is on.
DOCS_PATHS = frozenset({"/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"})
_METRICS = "/metrics"


class KeyRing:
    """The configured keys, as digests only."""

    def __init__(self, digests: tuple[str, ...]) -> None:
        self._digests = tuple(dict.fromkeys(digests))

    @classmethod
    def from_settings(
        cls, settings: ServerSettings, environ: dict[str, str] | None = None
    ) -> KeyRing:
        """The keys of ``api_keys_env`` (read now) and ``api_key_hashes``."""
        environ = dict(os.environ) if environ is None else environ
        named = settings.api_keys_env
        raw = environ.get(named, "") if named else ""
        keys = tuple(sha256_digest(key.strip()) for key in raw.split(",") if key.strip())
        return cls(keys + settings.api_key_hashes)

    @property
    def configured(self) -> bool:
        """Whether any key is configured (none: every route is open)."""
        return bool(self._digests)

    def identify(self, key: str | None) -> str | None:
        """The digest ``key`` matches, or None. Every digest is compared, each in constant
        time, so how long this takes says nothing about which or how much matched."""
        if not key:
            return None
        given = sha256_digest(key).encode()
        found = None
        for digest in self._digests:
            if hmac.compare_digest(given, digest.encode()):
                found = digest
        return found


class Spent(NamedTuple):
    """What one ``take`` left: the wait before the next request (0: this one may go), the
    whole requests left, and the seconds until the bucket is full again."""

    wait_s: float
    remaining: int
    reset_s: float


class TokenBuckets:
    """``rate`` requests per minute per client, bursts up to ``rate``, in this process."""

    def __init__(self, rate: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self._clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # client: (tokens, when)

    def take(self, client: str) -> Spent:
        """Spend one token of ``client``'s bucket (``wait_s`` 0), or say how long until the
        next one when there is none."""
        now = self._clock()
        per_s = self.rate / 60.0
        tokens, then = self._buckets.get(client, (float(self.rate), now))
        tokens = min(float(self.rate), tokens + (now - then) * per_s)
        wait_s = 0.0
        if tokens >= 1.0:
            tokens -= 1.0
        else:
            wait_s = (1.0 - tokens) / per_s
        self._buckets[client] = (tokens, now)
        if len(self._buckets) > 100_000:  # clients that went quiet are full again: forget them
            self._buckets = {
                k: v for k, v in self._buckets.items() if v[0] + (now - v[1]) * per_s < self.rate
            }
        return _spent(wait_s, tokens, self.rate)


def _spent(wait_s: float, tokens: float, rate: int) -> Spent:
    return Spent(wait_s, math.floor(tokens), (rate - tokens) * 60.0 / rate)


#: One token bucket in a Redis hash (``t`` tokens, ``w`` when, in ms of Redis' own clock,
#: so workers on different machines agree). Returns 0 or the ms until the next token, and
#: the tokens left in thousandths.
_TAKE = """
local rate = tonumber(ARGV[1])
local now = redis.call('TIME')
local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local state = redis.call('HMGET', KEYS[1], 't', 'w')
local tokens = tonumber(state[1]) or rate
local since = tonumber(state[2]) or ms
tokens = math.min(rate, tokens + (ms - since) * rate / 60000)
local wait = 0
if tokens >= 1 then tokens = tokens - 1 else wait = math.ceil((1 - tokens) * 60000 / rate) end
redis.call('HSET', KEYS[1], 't', tostring(tokens), 'w', ms)
redis.call('PEXPIRE', KEYS[1], 120000)
return {wait, math.floor(tokens * 1000)}
"""


class RedisBuckets:
    """``TokenBuckets`` kept in Redis, one bucket per client for every worker; when Redis
    fails, ``fallback`` (this process's buckets) decides."""

    def __init__(self, link: RedisLink, rate: int) -> None:
        self.rate = rate
        self._link = link
        self._take = link.client.register_script(_TAKE)
        self._prefix = f"{link.prefix}rate:"
        self.fallback = TokenBuckets(rate)

    def take(self, client: str) -> Spent:
        """As ``TokenBuckets.take``, from the shared bucket (blocking: call off the loop)."""
        key = self._prefix + client
        taken = self._link.call(
            "rate limit", lambda _client: self._take(keys=[key], args=[self.rate]), None
        )
        if taken is None:
            return self.fallback.take(client)
        waited, tokens = taken
        return _spent(int(waited) / 1000.0, int(tokens) / 1000.0, self.rate)


class AccessRules:
    """The keys and limits one app enforces (built from ``[server]``)."""

    def __init__(
        self,
        settings: ServerSettings,
        *,
        link: RedisLink | None = None,
        keys: KeyRing | None = None,
    ) -> None:
        self.keys = keys if keys is not None else KeyRing.from_settings(settings)
        self.metrics_public = settings.metrics_public or not self.keys.configured
        self.docs = settings.docs
        rate = settings.requests_per_minute
        self.buckets: TokenBuckets | RedisBuckets | None = None
        if rate:
            self.buckets = RedisBuckets(link, rate) if link is not None else TokenBuckets(rate)
        self.max_concurrent = settings.max_concurrent_per_key
        self._in_flight: dict[str, int] = {}

    @property
    def limited(self) -> bool:
        """Whether a rate or a concurrency limit is set (429 is possible)."""
        return self.buckets is not None or self.max_concurrent > 0

    @property
    def open_paths(self) -> frozenset[str]:
        """The routes that need no key and count against no limit."""
        paths = OPEN_PATHS | DOCS_PATHS if self.docs else OPEN_PATHS
        return paths | {_METRICS} if self.metrics_public else paths

    def open(self, method: str, path: str) -> bool:
        """Whether a request needs no key and counts against no limit (a preflight, say)."""
        return method == "OPTIONS" or path in self.open_paths

    async def spend(self, client: str) -> Spent | None:
        """Spend one of ``client``'s requests (``wait_s`` 0), or say how long until it may
        make one; None when no rate is set."""
        if self.buckets is None:
            return None
        if isinstance(self.buckets, RedisBuckets):
            return await asyncio.to_thread(self.buckets.take, client)
        return self.buckets.take(client)

    def enter(self, client: str) -> bool:
        """Take one of ``client``'s concurrent slots; False when it has none free."""
        if not self.max_concurrent:
            return True
        held = self._in_flight.get(client, 0)
        if held >= self.max_concurrent:
            return False
        self._in_flight[client] = held + 1
        return True

    def leave(self, client: str) -> None:
        """Give back the slot ``enter`` took."""
        if not self.max_concurrent:
            return
        held = self._in_flight.pop(client, 1) - 1
        if held > 0:
            self._in_flight[client] = held


def document_access(
    app: FastAPI, *, open_paths: frozenset[str], keyed: bool, limited: bool
) -> None:
    """Make the app's OpenAPI document say what the guard does: with ``keyed``, every route
    but ``open_paths`` takes a key either way a request may carry it and may answer 401;
    with ``limited``, those routes may answer 429."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        document = build()
        if keyed:
            document.setdefault("components", {})["securitySchemes"] = {
                "bearer": {"type": "http", "scheme": "bearer"},
                "apiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key"},
            }
            document["security"] = [{"bearer": []}, {"apiKey": []}]
        refusals = {**(_REFUSALS if keyed else {}), **(_LIMITED if limited else {})}
        for path, operations in document.get("paths", {}).items():
            for operation in operations.values():
                if path in open_paths:
                    operation["security"] = []
                else:
                    operation.setdefault("responses", {}).update(refusals)
        app.openapi_schema = document
        return document

    app.openapi = openapi  # type: ignore[method-assign]


def _refusal(description: str) -> dict[str, Any]:
    schema = {"$ref": "#/components/schemas/ErrorBody"}
    return {"description": description, "content": {"application/json": {"schema": schema}}}


_REFUSALS = {"401": _refusal("A valid API key is required (Authorization: Bearer, or X-API-Key).")}
_LIMITED = {"429": _refusal("Over the request rate or the concurrent requests; see Retry-After.")}


def presented_key(headers: dict[bytes, bytes]) -> str | None:
    """The key a request carries: ``Authorization: Bearer <key>``, else ``X-API-Key``. An
    ``Authorization`` header decides alone: one that is not a bearer token is no key, even
    beside a good ``X-API-Key`` (a request whose credentials disagree is refused)."""
    authorization = headers.get(b"authorization")
    if authorization is not None:
        scheme, _, token = authorization.decode("latin-1").strip().partition(" ")
        return token.strip() or None if scheme.lower() == "bearer" else None
    key = headers.get(b"x-api-key", b"").decode("latin-1").strip()
    return key or None


class Guard:
    """ASGI middleware: a key for every route but the open ones, then the limits.
    ``count(reason)`` sees every refusal (the metrics count them by reason, never by key).
    A path none of ``routes`` serves passes unguarded, to be the app's 404."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        rules: AccessRules,
        count: Callable[[str], None],
        routes: Sequence[BaseRoute] = (),
    ) -> None:
        self.app = app
        self.rules = rules
        self.count = count
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or self.rules.open(scope["method"], scope["path"])
            or not self._routed(scope)
        ):
            await self.app(scope, receive, send)
            return
        rules = self.rules
        client = self._client(scope)
        if client is None:
            await self._refuse(
                scope,
                receive,
                send,
                401,
                "unauthorized",
                "a valid API key is required",
                {"WWW-Authenticate": "Bearer"},
            )
            return
        spent = await rules.spend(client)
        headers = _rate_headers(rules, spent)
        if spent is not None and spent.wait_s > 0:
            await self._refuse(
                scope,
                receive,
                send,
                429,
                "rate_limited",
                "over the request rate for this key; retry later",
                {"Retry-After": str(max(1, math.ceil(spent.wait_s))), **headers},
            )
            return
        if not rules.enter(client):
            await self._refuse(
                scope,
                receive,
                send,
                429,
                "too_many_concurrent",
                f"this key already has {rules.max_concurrent} requests in flight",
                {"Retry-After": "1", **headers},
            )
            return

        async def counted(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message).update(headers)
            await send(message)

        try:
            await self.app(scope, receive, counted)
        finally:
            rules.leave(client)

    def _routed(self, scope: Scope) -> bool:
        """Whether a route serves the path (with this method or another)."""
        if not self.routes:
            return True
        return any(route.matches(scope)[0] is not Match.NONE for route in self.routes)

    def _client(self, scope: Scope) -> str | None:
        """Whom the limits count: the key's digest; with no keys, the client address;
        None when keys are configured and the request has none that matches."""
        if not self.rules.keys.configured:
            address = scope.get("client")
            return f"addr:{address[0]}" if address else "addr:unknown"
        return self.rules.keys.identify(presented_key(dict(scope["headers"])))

    async def _refuse(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        status: int,
        reason: str,
        message: str,
        headers: dict[str, str],
    ) -> None:
        self.count(reason)
        refusal = error_response(status, reason, message)
        refusal.headers.update(headers)
        await refusal(scope, receive, send)


def _rate_headers(rules: AccessRules, spent: Spent | None) -> dict[str, str]:
    """``X-RateLimit-*`` for what ``spent`` left (none without a rate)."""
    if spent is None or rules.buckets is None:
        return {}
    return {
        "X-RateLimit-Limit": str(rules.buckets.rate),
        "X-RateLimit-Remaining": str(spent.remaining),
        "X-RateLimit-Reset": str(math.ceil(spent.reset_s)),
    }
