"""The safe fetcher: the one way any URL that comes from outside is fetched.

``SafeFetcher`` fetches pages named by search results (and their redirects) under the
network policy of ``policy.py``; ``TrustedEndpoint`` calls one adapter's configured API
origin and nothing else; ``HttpRuntime`` owns both for a service. Bodies are bounded
(raw and decoded), every fetch has a total deadline, and only ``FetchError``s escape.

Both take the same cached exchange path (``exchange.py``): identical requests in flight at
once go out once, and with a ``ResponseCache`` replies are kept between questions
(``cache.py``), revalidated when stale. Each passes only its own wire step (``_send``). A
kept page is used only after the policy allows its origin now, exactly as a connection
would be.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
import string
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any, Generic, TypeVar
from urllib.parse import unquote

import httpx
from pydantic import JsonValue

from .._clock import Clock, system_clock
from .._digests import sha256_digest
from ..errors import (
    BlockedDestination,
    ContentTooLarge,
    FetchDeadlineExceeded,
    FetchError,
    NotRecorded,
    TooManyRedirects,
    UnsafeURL,
    UnsupportedContent,
    UpstreamStatus,
)
from ..settings import NetworkSettings
from ._backend import guarded_backend, guarded_client, verifying_context
from ._body import media_type, read_body
from ._breaker import CircuitBreaker
from ._cache import CacheKey, HttpExchange, ResponseCache
from ._exchange import CachedExchange, Received
from ._policy import Resolver, normalize_host
from ._retry_after import retry_after

__all__ = [
    "ACCEPT_ENCODING",
    "ACCEPT_LANGUAGE",
    "API_ACCEPT",
    "DEFAULT_ACCEPT_TYPES",
    "MAX_URL_LENGTH",
    "NOT_RECORDED_HEADER",
    "PAGE_ACCEPT",
    "ApiResponse",
    "FetchedPage",
    "HttpRuntime",
    "RawResponse",
    "SafeFetcher",
    "TrustedEndpoint",
    "check_url",
    "status_error",
]


@dataclass(frozen=True, slots=True)
class FetchedPage:
    """A page body as received: bytes bounded, not yet decoded or extracted."""

    url: str  # the URL asked for
    final_url: str  # after redirects
    status: int
    content_type: str  # media type only, lower case, e.g. "text/html"
    charset: str | None  # declared in the Content-Type header, if any
    body: bytes  # decoded from Content-Encoding, at most max_page_bytes
    raw_digest: str  # "sha256:<hex>" of ``body`` (the analysis memo keys the body by it)
    redirects: tuple[str, ...] = ()  # every hop's URL, in order
    connected_address: str | None = None
    #: For a page replayed from the response cache, when it was really fetched (or last
    #: confirmed by the origin); None for a page fetched just now (the caller's clock
    #: says when).
    fetched_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class ApiResponse:
    """A JSON answer from an adapter's own configured endpoint."""

    url: str
    status: int
    data: JsonValue
    raw_digest: str
    #: The bytes ``data`` was parsed from (what ``raw_digest`` digests), so a recorder can
    #: keep them exactly; empty when a double built the response without them.
    body: bytes = field(default=b"", repr=False)
    #: For a reply replayed from the response cache, when it was really fetched; None for
    #: one fetched just now.
    fetched_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class RawResponse:
    """A body from an endpoint's own origin, as bytes (bounded, not decoded as text)."""

    url: str
    status: int
    content_type: str  # media type only, lower case
    charset: str | None
    body: bytes
    raw_digest: str  # "sha256:<hex>" of ``body``
    fetched_at: datetime | None = None


# --------------------------------------------------------------------------------------
# Implementation. ``SafeFetcher`` for every URL from outside, ``TrustedEndpoint`` for an
# adapter's own configured API origin, ``HttpRuntime`` owning both for a service.

#: Longer URLs are refused before parsing; real pages stay far below this.
MAX_URL_LENGTH = 2048


PAGE_ACCEPT = "text/html,application/xhtml+xml;q=0.9,text/plain;q=0.8,application/pdf;q=0.7"
#: SearXNG's bot limiter rejects a request whose Accept header lacks text/html, even for
#: its JSON API.
API_ACCEPT = "application/json, text/html;q=0.9"
#: Set by hand: httpx would advertise every decoder it has (br, zstd), and we only
#: decode what we can bound.
ACCEPT_ENCODING = "gzip, deflate"
ACCEPT_LANGUAGE = "zh-CN,zh;q=0.9,en;q=0.8"
#: Page bodies the fetcher reads: HTML, plain text and PDF (read page by page, ``text/_pdf.py``).
DEFAULT_ACCEPT_TYPES = frozenset(
    {"text/html", "application/xhtml+xml", "text/plain", "application/pdf"}
)

_REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
_HOST_CHARACTERS = frozenset(string.ascii_letters + string.digits + ".-_:")
_DEFAULT_PORTS = {"http": 80, "https": 443}
_T = TypeVar("_T")


def check_url(url: str) -> httpx.URL:
    """The URL gate: parse with httpx's own parser, allow only what we will connect to.

    http/https only, no userinfo, a plain host, at most ``MAX_URL_LENGTH`` characters.
    Anything else raises ``UnsafeURL`` with the reason in ``detail``; never another error.
    Addresses and ports are judged later, at connect time, by the network guard.
    """
    if len(url) > MAX_URL_LENGTH:
        raise UnsafeURL(url[:200] + "…", f"URL longer than {MAX_URL_LENGTH} characters")
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError, ValueError) as exc:
        raise UnsafeURL(url, f"invalid URL: {exc}") from None
    if parsed.scheme not in _DEFAULT_PORTS:
        raise UnsafeURL(url, f"scheme {parsed.scheme or '(none)'!r} is not http or https")
    if parsed.userinfo:
        raise UnsafeURL(url, "credentials in the URL are not allowed")
    host = parsed.raw_host.decode("ascii", errors="replace")
    if not host or not set(host) <= _HOST_CHARACTERS:
        raise UnsafeURL(url, f"host {host!r} is not a plain host name or address")
    return parsed


def _origin(url: httpx.URL) -> tuple[str, str, int]:
    port = url.port or _DEFAULT_PORTS[url.scheme]
    return (url.scheme, normalize_host(url.raw_host.decode("ascii")), port)


#: The header (and its value) a replayed test world puts on its 404 for a request it holds
#: no recording for (``external_query_service.testing``).
NOT_RECORDED_HEADER = ("x-external-query-world", "not-recorded")


def status_error(url: str, response: httpx.Response, clock: Clock = system_clock) -> UpstreamStatus:
    """The error for a non-success answer: ``NotRecorded`` (naming the request by method,
    path and query: the host is the provider's) when a replayed world says it has no
    recording, else ``UpstreamStatus`` with the wait a 429 or 503 asked for (a date in
    ``Retry-After`` is read against ``clock``)."""
    name, value = NOT_RECORDED_HEADER
    if response.status_code == 404 and response.headers.get(name) == value:
        target = unquote(response.request.url.raw_path.decode("ascii", "replace"))
        return NotRecorded(url, f"{response.request.method} {target}")
    wait = retry_after(response.headers.get("retry-after"), clock)
    return UpstreamStatus(url, response.status_code, retry_after=wait)


def _headers(network: NetworkSettings, accept: str) -> dict[str, str]:
    return {
        "User-Agent": network.user_agent,
        "Accept": accept,
        "Accept-Encoding": ACCEPT_ENCODING,
        "Accept-Language": ACCEPT_LANGUAGE,
    }


class _PerLoop(Generic[_T]):
    """One object per running event loop, created lazily inside that loop.

    An httpx client (and an asyncio semaphore) is bound to the event loop that first used
    it and fails when used from another; objects of loops that have closed are forgotten.
    """

    def __init__(self, factory: Callable[[], _T]) -> None:
        self._factory = factory
        self._items: dict[asyncio.AbstractEventLoop, _T] = {}

    def get(self) -> _T:
        loop = asyncio.get_running_loop()
        self._forget_closed()
        item = self._items.get(loop)
        if item is None:
            item = self._items[loop] = self._factory()
        return item

    def pop_current(self) -> _T | None:
        self._forget_closed()
        return self._items.pop(asyncio.get_running_loop(), None)

    def _forget_closed(self) -> None:
        for loop in [loop for loop in self._items if loop.is_closed()]:
            del self._items[loop]


class _HostSlots:
    """At most ``limit`` fetches per host at once; idle hosts are dropped from the table."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._slots: dict[str, tuple[asyncio.Semaphore, int]] = {}

    @contextlib.asynccontextmanager
    async def hold(self, host: str) -> AsyncIterator[None]:
        semaphore, users = self._slots.get(host, (asyncio.Semaphore(self._limit), 0))
        self._slots[host] = (semaphore, users + 1)
        try:
            async with semaphore:
                yield
        finally:
            semaphore, users = self._slots[host]
            if users == 1:
                del self._slots[host]
            else:
                self._slots[host] = (semaphore, users - 1)


@dataclass
class _FetchLoopState:
    client: httpx.AsyncClient
    slots: asyncio.Semaphore
    hosts: _HostSlots


def _connected_address(response: httpx.Response) -> str | None:
    stream = response.extensions.get("network_stream")
    if stream is None:
        return None
    address = stream.get_extra_info("server_addr")
    return str(address[0]) if isinstance(address, tuple) and address else None


@contextlib.contextmanager
def _mapped_errors(url: str, hop: str | None = None) -> Iterator[None]:
    """Let callers see only ``FetchError``s, about the URL they asked for."""
    where = f" (redirect hop {hop})" if hop is not None else ""
    try:
        yield
    except UpstreamStatus:
        raise
    except FetchError as exc:
        if exc.url == url:
            raise
        detail = f"{exc.detail}{where}"
        if isinstance(exc, UnsafeURL | BlockedDestination):
            raise type(exc)(url, detail) from None
        if type(exc) is FetchError:
            raise FetchError(url, detail, reason=exc.reason) from None
        raise
    except httpx.TimeoutException as exc:
        raise FetchDeadlineExceeded(url, f"{type(exc).__name__}{where}") from None
    except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
        raise UnsafeURL(url, f"{exc}{where}") from None
    except httpx.ConnectError as exc:
        raise FetchError(url, f"{exc}{where}", reason="connect_failed") from None
    except httpx.RemoteProtocolError as exc:
        raise FetchError(url, f"{exc}{where}", reason="protocol_error") from None
    except (httpx.HTTPError, httpx.StreamError, OSError) as exc:
        raise FetchError(
            url, f"{type(exc).__name__}: {exc}{where}", reason="transport_error"
        ) from None


@contextlib.asynccontextmanager
async def _deadline(url: str, seconds: float) -> AsyncIterator[None]:
    """One deadline over connect, redirects and the whole body (httpx's read timeout is
    per read, so a slow drip would never trip it)."""
    try:
        async with asyncio.timeout(seconds) as scope:
            yield
    except TimeoutError:
        if scope.expired():
            raise FetchDeadlineExceeded(url, f"no complete response within {seconds}s") from None
        raise


@contextlib.asynccontextmanager
async def _caller_deadline(url: str, when: float | None) -> AsyncIterator[None]:
    """The caller's own deadline (event-loop time), over everything including the wait
    for a fetch slot; ``None``: no bound beyond the fetcher's own."""
    try:
        async with asyncio.timeout_at(when) as scope:
            yield
    except TimeoutError:
        if scope.expired():
            raise FetchDeadlineExceeded(
                url, "no complete response by the caller's deadline"
            ) from None
        raise


@dataclass
class _Progress:
    """How far one fetch got, so its failure can say whether an answer had begun."""

    responded: bool = False


class SafeFetcher:
    """The one way a URL that came from outside (search results, redirects) is fetched.

    Every URL and redirect hop passes the URL gate and, at connect time, the address
    policy (``policy.py``). Redirects are followed by hand, at most
    ``network.max_redirects`` hops. Bodies: only ``accept_types``, at most
    ``network.max_page_bytes`` raw and decoded, within ``network.timeout_s`` in total.
    A non-2xx final answer raises ``UpstreamStatus``. A host that keeps failing is left
    alone for a while (``CircuitBreaker``). Only ``FetchError``s escape.

    At most ``network.max_connections`` fetches run at once per event loop, and
    ``network.max_connections_per_host`` to one host. Fetches of the same URL in flight
    at once share one (unless the caller brings its own redirect rule). With ``cache``,
    each hop's reply is kept under HTTP's caching rules and replayed while fresh, after
    the URL gate, the caller's redirect rule and the address policy have allowed it again;
    the page then carries the ``fetched_at`` of the real fetch. ``clock`` stamps replies.

    Safe to use from several event loops one after another (one client per loop);
    ``aclose()`` closes the client of the running loop.
    """

    def __init__(
        self,
        network: NetworkSettings,
        *,
        resolver: Resolver | None = None,
        accept_types: frozenset[str] = DEFAULT_ACCEPT_TYPES,
        breaker: CircuitBreaker | None = None,
        cache: ResponseCache | None = None,
        clock: Clock = system_clock,
    ) -> None:
        self._network = network
        self._resolver = resolver
        self._accept_types = frozenset(item.lower() for item in accept_types)
        self._breaker = breaker or CircuitBreaker()
        self._clock = clock
        self._guard = guarded_backend(network, resolver=resolver)
        self._exchange = CachedExchange(cache, clock)
        self._progress: dict[str, _Progress] = {}  # how far each shared fetch in flight got
        self._ssl_context: ssl.SSLContext | None = None  # built on first use (~25 ms)
        self._loops: _PerLoop[_FetchLoopState] = _PerLoop(self._new_state)

    def prepare(self) -> None:
        """Build the running loop's client now rather than on its first fetch."""
        self._loops.get()

    def _new_state(self) -> _FetchLoopState:
        self._ssl_context = self._ssl_context or verifying_context(self._network)
        client = guarded_client(
            self._network,
            headers=_headers(self._network, PAGE_ACCEPT),
            resolver=self._resolver,
            max_connections=self._network.max_connections,
            ssl_context=self._ssl_context,
        )
        return _FetchLoopState(
            client,
            asyncio.Semaphore(self._network.max_connections),
            _HostSlots(self._network.max_connections_per_host),
        )

    async def fetch(
        self,
        url: str,
        *,
        allow_redirect: Callable[[str], bool] | None = None,
        deadline: float | None = None,
    ) -> FetchedPage:
        """Fetch ``url``. ``allow_redirect`` (optional) is asked about every redirect hop
        after the URL gate and before the hop is requested; ``False`` stops the fetch with
        ``UnsafeURL`` (detail "redirect refused by the caller", the hop not named). ``deadline``
        (optional, event-loop time) ends this caller's wait sooner than ``timeout_s`` would,
        waiting for a slot included, with ``FetchDeadlineExceeded``. Every ``FetchError``
        leaving here says in ``responded`` whether the final response had begun."""
        start = check_url(url)
        if self._exchange.cache is not None:
            # Every hop kept and fresh: no slot, no connection, the policy checked per hop.
            kept = await self._follow(url, start, allow_redirect)
            if kept is not None:
                return kept
        # Callers of one shared fetch share its progress, so each can tell, even when its own
        # deadline ends the wait, whether the answer had begun. A caller with its own
        # redirect rule fetches on its own.
        shared = allow_redirect is None
        progress = self._progress.setdefault(url, _Progress()) if shared else _Progress()
        try:
            async with _caller_deadline(url, deadline):
                if not shared:
                    return await self._fetch(url, start, allow_redirect, progress)
                return await self._exchange.once(
                    url,
                    partial(self._fetch, url, start, None, progress),
                    key=_page_key(start),
                    kept=partial(self._follow, url, start, None),
                )
        except FetchError as exc:
            exc.responded = exc.responded or progress.responded
            raise

    async def _fetch(
        self,
        url: str,
        start: httpx.URL,
        allow_redirect: Callable[[str], bool] | None,
        progress: _Progress,
    ) -> FetchedPage:
        """``_follow`` over the network, within a fetch slot, the host's slot and circuit
        breaker, and ``timeout_s``."""
        host = _origin(start)[1]
        state = self._loops.get()
        try:
            # timeout_s starts once a slot is held: waiting for one is not the page's fault
            # (the caller's deadline, if any, does count it).
            async with state.slots, state.hosts.hold(host):
                with self._breaker.guard(host, url):
                    async with _deadline(url, self._network.timeout_s):
                        page = await self._follow(
                            url, start, allow_redirect, state.client, progress
                        )
        except FetchError as exc:
            exc.responded = progress.responded
            raise
        finally:
            if self._progress.get(url) is progress:
                del self._progress[url]  # the next fetch of this URL starts afresh
        assert page is not None  # a walk over the network never comes back empty
        return page

    async def _follow(
        self,
        url: str,
        start: httpx.URL,
        allow_redirect: Callable[[str], bool] | None,
        client: httpx.AsyncClient | None = None,
        progress: _Progress | None = None,
    ) -> FetchedPage | None:
        """Walk the redirect chain from ``start``, hop by hop. With ``client``, each hop is
        a kept reply still fresh or a request through ``client``; without one, kept replies
        only: None as soon as a hop has none. A kept reply is used only once the policy
        allows its origin now (a host refused since it was kept is never served from it)."""
        current = start
        redirects: list[str] = []
        while True:
            with _mapped_errors(url, str(current) if redirects else None):
                key = _page_key(current)
                if client is None:
                    hop = await self._exchange.fresh(key)
                    if hop is None:
                        return None
                else:
                    hop = await self._exchange.request(
                        key, partial(self._send, client, current, url, progress)
                    )
                if hop.kept:
                    _, host, port = _origin(current)
                    await self._guard.admit(host, port)
                if hop.status not in _REDIRECT_STATUSES:
                    return self._page(hop, url, redirects)
                current = self._redirect(url, current, hop, len(redirects), allow_redirect)
            redirects.append(str(current))

    def _redirect(
        self,
        url: str,
        current: httpx.URL,
        hop: HttpExchange,
        followed: int,
        allow_redirect: Callable[[str], bool] | None,
    ) -> httpx.URL:
        """Where the redirect ``hop`` (from ``current``, after ``followed`` others) leads,
        once the URL gate and the caller's rule allow it."""
        if not hop.location:
            raise UpstreamStatus(url, hop.status, "redirect without Location")
        if followed >= self._network.max_redirects:
            raise TooManyRedirects(url, f"more than {self._network.max_redirects} redirects")
        try:
            target = current.join(hop.location)
        except httpx.InvalidURL as exc:
            raise UnsafeURL(url, f"bad redirect {hop.location!r}: {exc}") from None
        try:
            checked = check_url(str(target))
        except UnsafeURL as exc:
            raise UnsafeURL(url, f"redirect refused: {exc.detail}") from None
        if allow_redirect is not None and not allow_redirect(str(checked)):
            # The hop is not named: the caller was asked about it, and a rule may refuse it
            # for what it carries (a credential), which must not travel on in a message.
            raise UnsafeURL(url, "redirect refused by the caller")
        return checked

    async def _send(
        self,
        client: httpx.AsyncClient,
        target: httpx.URL,
        url: str,
        progress: _Progress | None,
        validators: dict[str, str],
    ) -> Received:
        """One GET of ``target``: a redirect's Location, or a page body that passed the
        checks (status, type, size) before it was read; a 304 to ``validators`` as such."""
        async with client.stream("GET", target, headers=validators or None) as response:
            status = response.status_code
            if status == 304 and validators:
                return Received(response.headers, None)
            content_type, charset = media_type(response)
            body, connected, location = b"", None, None
            if status in _REDIRECT_STATUSES:
                location = response.headers.get("location")
            else:
                if progress is not None:
                    progress.responded = True  # the final answer began: a failure now is a cut-off
                if not 200 <= status < 300:
                    raise status_error(url, response, self._clock)
                self._check(status, content_type, url)
                connected = _connected_address(response)  # before the body: the socket closes
                body = await read_body(response, url, self._network.max_page_bytes)
        reply = HttpExchange(
            url=str(response.url),
            status=status,
            content_type=content_type,
            charset=charset,
            body=body,
            fetched_at=self._clock(),
            location=location,
            connected_address=connected,
        )
        return Received(response.headers, reply)

    def _check(self, status: int, content_type: str, url: str) -> None:
        if not 200 <= status < 300:
            raise UpstreamStatus(url, status)
        if content_type not in self._accept_types:
            raise UnsupportedContent(url, f"content type {content_type or '(none)'!r}")

    def _page(self, hop: HttpExchange, url: str, redirects: list[str]) -> FetchedPage:
        # Checked again for a kept reply: another fetcher (other types, a smaller cap) may
        # have kept it.
        self._check(hop.status, hop.content_type, url)
        if len(hop.body) > self._network.max_page_bytes:
            raise ContentTooLarge(url, f"more than {self._network.max_page_bytes} bytes")
        return FetchedPage(
            url=url,
            final_url=hop.url,
            status=hop.status,
            content_type=hop.content_type,
            charset=hop.charset,
            body=hop.body,
            raw_digest=sha256_digest(hop.body),
            redirects=tuple(redirects),
            connected_address=hop.connected_address,
            fetched_at=hop.fetched_at if hop.kept else None,
        )

    async def aclose(self) -> None:
        """Close the running loop's client (a later fetch opens a new one)."""
        state = self._loops.pop_current()
        if state is not None:
            await state.client.aclose()


def _page_key(target: httpx.URL) -> tuple[str, str, str]:
    return ("page", "GET", str(target))


class TrustedEndpoint:
    """An adapter's own API origin: trusted at exactly (scheme, host, port) of ``base_url``.

    That origin skips the address policy (a self-hosted SearXNG on 127.0.0.1 works
    without ``allowed_networks``); any other origin is refused with ``UnsafeURL``.
    ``path`` joins onto the base path (``http://h:1/v1`` + ``latest`` → ``/v1/latest``).
    No redirects are followed (3xx → ``UpstreamStatus``); non-2xx → ``UpstreamStatus``;
    a body that is not UTF-8 JSON → ``FetchError(reason="invalid_json")``. Bodies are
    bounded and the deadline is the fetcher's. After repeated failures the origin's circuit
    opens (``CircuitBreaker``): calls then fail at once, so failover is quick.

    Identical calls in flight at once go out once; with ``cache``, replies are kept under
    HTTP's caching rules and replayed while fresh (with the ``fetched_at`` of the real
    call). At most ``network.max_connections_per_host`` connections at once.
    """

    def __init__(
        self,
        base_url: str,
        network: NetworkSettings,
        *,
        resolver: Resolver | None = None,
        breaker: CircuitBreaker | None = None,
        cache: ResponseCache | None = None,
        clock: Clock = system_clock,
        kind: str = "api",
    ) -> None:
        base = check_url(base_url)
        #: What its replies are kept as in the cache (``api``, or ``search`` for an engine).
        self.kind = kind
        self._breaker = breaker or CircuitBreaker()
        self._base_url = base_url
        self._base = base.copy_with(query=None, fragment=None)
        self._origin = _origin(base)
        self._network = network
        self._resolver = resolver
        self._clock = clock
        self._exchange = CachedExchange(cache, clock)
        self._ssl_context: ssl.SSLContext | None = None
        self._loops: _PerLoop[httpx.AsyncClient] = _PerLoop(self._new_client)

    @property
    def base_url(self) -> str:
        """The configured base URL every request is relative to."""
        return self._base_url

    def _new_client(self) -> httpx.AsyncClient:
        _, host, port = self._origin
        self._ssl_context = self._ssl_context or verifying_context(self._network)
        return guarded_client(
            self._network,
            headers=_headers(self._network, API_ACCEPT),
            resolver=self._resolver,
            trusted_origins=[(host, port)],
            max_connections=self._network.max_connections_per_host,
            ssl_context=self._ssl_context,
        )

    def url_for(self, path: str) -> httpx.URL:
        """The URL ``path`` names under the base URL; ``UnsafeURL`` if off the origin."""
        try:
            is_absolute = httpx.URL(path).is_absolute_url
        except httpx.InvalidURL as exc:
            raise UnsafeURL(path, f"invalid path: {exc}") from None
        if is_absolute:
            target = check_url(path)
        else:
            joined = (
                self._base.path.rstrip("/") + "/" + path.lstrip("/") if path else self._base.path
            )
            try:
                target = self._base.copy_with(raw_path=(joined or "/").encode("utf-8"))
            except httpx.InvalidURL as exc:
                raise UnsafeURL(path, f"invalid path: {exc}") from None
        if _origin(target) != self._origin:
            raise UnsafeURL(str(target), f"not on the endpoint origin {self._base_url}")
        return target

    def _target(self, path: str, params: Mapping[str, str | int] | None) -> httpx.URL:
        """``path`` (with ``params``) on this endpoint; anything off its origin is refused."""
        target = self.url_for(path)
        if params:
            target = target.copy_merge_params(dict(params))
        if _origin(target) != self._origin:
            raise UnsafeURL(str(target), f"not on the endpoint origin {self._base_url}")
        return target

    async def get_json(
        self,
        path: str,
        params: Mapping[str, str | int] | None = None,
        *,
        headers: Mapping[str, str] | None = None,
    ) -> ApiResponse:
        """GET ``path`` (with ``params``) and parse the JSON answer. ``headers`` are added to
        this request only (an API key header, say); they are never logged or kept."""
        return await self._json("GET", path, params, headers=headers)

    async def post_json(
        self,
        path: str,
        body: JsonValue,
        *,
        headers: Mapping[str, str] | None = None,
    ) -> ApiResponse:
        """POST ``body`` as JSON to ``path`` and parse the JSON answer: same origin rule,
        bound, deadline and errors as ``get_json``."""
        content = json.dumps(body, ensure_ascii=False).encode("utf-8")
        sent = {"Content-Type": "application/json", **(headers or {})}
        return await self._json("POST", path, None, headers=sent, content=content)

    async def _json(
        self,
        method: str,
        path: str,
        params: Mapping[str, str | int] | None,
        *,
        headers: Mapping[str, str] | None,
        content: bytes | None = None,
    ) -> ApiResponse:
        """``method`` on ``path`` (with ``params``) under the base URL, the body parsed as
        JSON, within the network timeout and the host's circuit breaker; failures are
        ``FetchError``s (a refusal carries its Retry-After)."""
        reply = await self._call(self._target(path, params), method, headers, content)
        return ApiResponse(
            url=reply.url,
            status=reply.status,
            data=_parse_json(reply.url, reply.body),
            raw_digest=sha256_digest(reply.body),
            body=reply.body,
            fetched_at=reply.fetched_at if reply.kept else None,
        )

    async def get_bytes(
        self, path: str, params: Mapping[str, str | int] | None = None
    ) -> RawResponse:
        """Like ``get_json`` but the body comes back as bytes, whatever its type: same
        origin rule, no redirects (3xx → ``UpstreamStatus``), same bound and deadline.
        Anonymous: no Cookie header is sent, even if an earlier answer set one."""
        reply = await self._call(self._target(path, params))
        return RawResponse(
            url=reply.url,
            status=reply.status,
            content_type=reply.content_type,
            charset=reply.charset,
            body=reply.body,
            raw_digest=sha256_digest(reply.body),
            fetched_at=reply.fetched_at if reply.kept else None,
        )

    async def _call(
        self,
        target: httpx.URL,
        method: str = "GET",
        headers: Mapping[str, str] | None = None,
        content: bytes | None = None,
    ) -> HttpExchange:
        """``method`` on ``target`` (already on this origin). A GET is replayed when kept
        and fresh; identical calls in flight at once (a POST: the same body too) go out
        once; only GET replies are kept."""
        url = str(target)
        key: CacheKey | None = (self.kind, "GET", url) if method == "GET" else None
        if key is not None:
            kept = await self._exchange.fresh(key)
            if kept is not None:
                return kept
        flight = url if content is None else f"{url} {sha256_digest(content)}"
        send = partial(self._send, target, method, headers, content)
        return await self._exchange.once(
            flight,
            partial(self._exchange.request, key, send),
            key=key,
            kept=partial(self._exchange.fresh, key) if key is not None else None,
        )

    async def _send(
        self,
        target: httpx.URL,
        method: str,
        headers: Mapping[str, str] | None,
        content: bytes | None,
        validators: dict[str, str],
    ) -> Received:
        """One request to the origin, within its circuit breaker and the network timeout:
        a 2xx body, or a 304 to ``validators``; any other answer is an ``UpstreamStatus``.
        Anonymous: no Cookie header goes out, even if an earlier answer set one."""
        url = str(target)
        client = self._loops.get()
        sent = {**validators, **(headers or {})}
        with self._breaker.guard(self._origin[1], url):
            async with _deadline(url, self._network.timeout_s):
                with _mapped_errors(url):
                    request = client.build_request(
                        method, target, headers=sent or None, content=content
                    )
                    request.headers.pop("cookie", None)
                    response = await client.send(request, stream=True)
                    try:
                        if response.status_code == 304 and validators:
                            return Received(response.headers, None)
                        if not 200 <= response.status_code < 300:
                            raise status_error(url, response, self._clock)
                        content_type, charset = media_type(response)
                        body = await read_body(response, url, self._network.max_page_bytes)
                    finally:
                        await response.aclose()
        reply = HttpExchange(
            url=url,
            status=response.status_code,
            content_type=content_type,
            charset=charset,
            body=body,
            fetched_at=self._clock(),
        )
        return Received(response.headers, reply)

    async def aclose(self) -> None:
        """Close the client the current event loop uses."""
        client = self._loops.pop_current()
        if client is not None:
            await client.aclose()


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _parse_json(url: str, body: bytes) -> JsonValue:
    try:
        data: JsonValue = json.loads(body.decode("utf-8"), parse_constant=_reject_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise FetchError(url, f"{type(exc).__name__}: {exc}"[:300], reason="invalid_json") from None
    return data


class HttpRuntime:
    """What a service holds for HTTP: one ``SafeFetcher`` and one ``TrustedEndpoint`` per
    configured base URL (created on first use, then reused), all sharing ``cache`` (None:
    nothing kept between questions) and stamping replies with ``clock``. ``endpoint``
    fits the adapters' ``EndpointFactory``; ``aclose()`` closes everything of the running
    loop.
    """

    def __init__(
        self,
        network: NetworkSettings,
        *,
        resolver: Resolver | None = None,
        cache: ResponseCache | None = None,
        clock: Clock = system_clock,
    ) -> None:
        self._network = network
        self._resolver = resolver
        self.cache = cache
        self._clock = clock
        self.fetcher = SafeFetcher(network, resolver=resolver, cache=cache, clock=clock)
        self._endpoints: dict[tuple[str, str], TrustedEndpoint] = {}

    def endpoint(self, base_url: str, *, kind: str = "api") -> TrustedEndpoint:
        """The trusted endpoint for ``base_url``, made once and reused; ``kind`` is what
        its replies are kept as (``api``; ``search`` for a search engine:
        ``search_endpoint``)."""
        endpoint = self._endpoints.get((base_url, kind))
        if endpoint is None:
            endpoint = self._endpoints[(base_url, kind)] = self._new_endpoint(base_url, kind)
        return endpoint

    def search_endpoint(self, base_url: str) -> TrustedEndpoint:
        """``endpoint(base_url, kind="search")``: a search engine's API root."""
        return self.endpoint(base_url, kind="search")

    def _new_endpoint(self, base_url: str, kind: str = "api") -> TrustedEndpoint:
        """Builds the endpoint ``endpoint()`` keeps; a subclass (the recorder) wraps it."""
        return TrustedEndpoint(
            base_url,
            self._network,
            resolver=self._resolver,
            cache=self.cache,
            clock=self._clock,
            kind=kind,
        )

    async def aclose(self) -> None:
        """Close the page fetcher and every endpoint made so far."""
        await self.fetcher.aclose()
        for endpoint in self._endpoints.values():
            await endpoint.aclose()
