"""The safe fetcher: the one way any URL that comes from outside is fetched.

``SafeFetcher`` fetches pages named by search results (and their redirects) under the
network policy of ``network.py``; ``TrustedEndpoint`` calls one adapter's configured API
origin and nothing else; ``HttpRuntime`` owns both for a service. Bodies are bounded
(raw and decoded), every fetch has a total deadline, and only ``FetchError``s escape.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
import string
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import httpx
from pydantic import JsonValue

from ..digests import sha256_digest
from ..errors import (
    BlockedDestination,
    FetchDeadlineExceeded,
    FetchError,
    TooManyRedirects,
    UnsafeURL,
    UnsupportedContent,
    UpstreamStatus,
)
from ..settings import NetworkSettings
from .backend import guarded_client
from .body import media_type, read_body
from .breaker import CircuitBreaker
from .policy import Resolver, normalize_host

__all__ = [
    "ApiResponse",
    "FetchedPage",
    "HttpRuntime",
    "RawResponse",
    "SafeFetcher",
    "TrustedEndpoint",
    "check_url",
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
    raw_digest: str  # "sha256:<hex>" of ``body``
    redirects: tuple[str, ...] = ()  # every hop's URL, in order
    connected_address: str | None = None


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


@dataclass(frozen=True, slots=True)
class RawResponse:
    """A body from an endpoint's own origin, as bytes (bounded, not decoded as text)."""

    url: str
    status: int
    content_type: str  # media type only, lower case
    charset: str | None
    body: bytes
    raw_digest: str  # "sha256:<hex>" of ``body``


# --------------------------------------------------------------------------------------
# Implementation. ``SafeFetcher`` for every URL from outside, ``TrustedEndpoint`` for an
# adapter's own configured API origin, ``HttpRuntime`` owning both for a service.

#: Longer URLs are refused before parsing; real pages stay far below this.
MAX_URL_LENGTH = 2048
#: Fetches in flight per event loop, and per host among them.
GLOBAL_FETCHES = 8
PER_HOST_FETCHES = 2


PAGE_ACCEPT = "text/html,application/xhtml+xml;q=0.9,text/plain;q=0.8"
#: SearXNG's limiter rejects an Accept without text/html (APIS.md §1).
API_ACCEPT = "application/json, text/html;q=0.9"
#: Set by hand: httpx would advertise every decoder it has (br, zstd), and we only
#: decode what we can bound.
ACCEPT_ENCODING = "gzip, deflate"
ACCEPT_LANGUAGE = "zh-CN,zh;q=0.9,en;q=0.8"
DEFAULT_ACCEPT_TYPES = frozenset({"text/html", "application/xhtml+xml", "text/plain"})

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


def _verifying_context(network: NetworkSettings) -> ssl.SSLContext:
    """Certificates checked against certifi's roots plus ``network.ca_bundle`` (if set);
    SSL_CERT_FILE and friends ignored."""
    context = httpx.create_ssl_context(verify=True, trust_env=False)
    if network.ca_bundle is not None:
        try:
            context.load_verify_locations(cafile=str(network.ca_bundle))
        except (OSError, ssl.SSLError) as exc:
            raise FetchError(
                str(network.ca_bundle), f"cannot load ca_bundle: {exc}", reason="ca_bundle_invalid"
            ) from None
    return context


def _headers(network: NetworkSettings, accept: str) -> dict[str, str]:
    return {
        "User-Agent": network.user_agent,
        "Accept": accept,
        "Accept-Encoding": ACCEPT_ENCODING,
        "Accept-Language": ACCEPT_LANGUAGE,
    }


class _PerLoop(Generic[_T]):
    """One object per running event loop, created lazily inside that loop.

    An httpx client (and an asyncio semaphore) must not cross event loops (httpx#2473);
    objects of loops that have closed are forgotten.
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
    policy (``network.py``). Redirects are followed by hand, at most
    ``network.max_redirects`` hops. Bodies: only ``accept_types``, at most
    ``network.max_page_bytes`` raw and decoded, within ``network.timeout_s`` in total.
    A non-2xx final answer raises ``UpstreamStatus``. A host that keeps failing is left
    alone for a while (``CircuitBreaker``). Only ``FetchError``s escape.

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
    ) -> None:
        self._network = network
        self._resolver = resolver
        self._accept_types = frozenset(item.lower() for item in accept_types)
        self._breaker = breaker or CircuitBreaker()
        self._ssl_context: ssl.SSLContext | None = None  # built on first use (~25 ms)
        self._loops: _PerLoop[_FetchLoopState] = _PerLoop(self._new_state)

    def _new_state(self) -> _FetchLoopState:
        self._ssl_context = self._ssl_context or _verifying_context(self._network)
        client = guarded_client(
            self._network,
            headers=_headers(self._network, PAGE_ACCEPT),
            resolver=self._resolver,
            max_connections=2 * GLOBAL_FETCHES,
            ssl_context=self._ssl_context,
        )
        return _FetchLoopState(
            client, asyncio.Semaphore(GLOBAL_FETCHES), _HostSlots(PER_HOST_FETCHES)
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
        ``UnsafeURL`` (detail "redirect to <hop> refused by the caller"). ``deadline``
        (optional, event-loop time) ends the fetch sooner than ``timeout_s`` would, waiting
        for a slot included, with ``FetchDeadlineExceeded``. Every ``FetchError`` leaving
        here says in ``responded`` whether the final response had begun."""
        start = check_url(url)
        host = _origin(start)[1]
        state = self._loops.get()
        progress = _Progress()
        try:
            # timeout_s starts once a slot is held: waiting for one is not the page's fault
            # (the caller's deadline, if any, does count it).
            async with _caller_deadline(url, deadline), state.slots, state.hosts.hold(host):
                with self._breaker.guard(host, url):
                    async with _deadline(url, self._network.timeout_s):
                        return await self._follow(
                            state.client, url, start, allow_redirect, progress
                        )
        except FetchError as exc:
            exc.responded = progress.responded
            raise

    async def _follow(
        self,
        client: httpx.AsyncClient,
        url: str,
        start: httpx.URL,
        allow_redirect: Callable[[str], bool] | None,
        progress: _Progress,
    ) -> FetchedPage:
        current = start
        redirects: list[str] = []
        while True:
            with _mapped_errors(url, str(current) if redirects else None):
                async with client.stream("GET", current) as response:
                    if response.status_code in _REDIRECT_STATUSES:
                        location = response.headers.get("location")
                        if not location:
                            raise UpstreamStatus(
                                url, response.status_code, "redirect without Location"
                            )
                        if len(redirects) >= self._network.max_redirects:
                            raise TooManyRedirects(
                                url, f"more than {self._network.max_redirects} redirects"
                            )
                        try:
                            target = current.join(location)
                        except httpx.InvalidURL as exc:
                            raise UnsafeURL(url, f"bad redirect {location!r}: {exc}") from None
                        try:
                            current = check_url(str(target))
                        except UnsafeURL as exc:
                            raise UnsafeURL(url, f"redirect refused: {exc.detail}") from None
                        if allow_redirect is not None and not allow_redirect(str(current)):
                            raise UnsafeURL(url, f"redirect to {current} refused by the caller")
                        redirects.append(str(current))
                        continue
                    progress.responded = True
                    return await self._page(response, url, redirects)

    async def _page(self, response: httpx.Response, url: str, redirects: list[str]) -> FetchedPage:
        if not 200 <= response.status_code < 300:
            raise UpstreamStatus(url, response.status_code)
        content_type, charset = media_type(response)
        if content_type not in self._accept_types:
            raise UnsupportedContent(url, f"content type {content_type or '(none)'!r}")
        connected = _connected_address(response)  # before the body: the socket closes after it
        body = await read_body(response, url, self._network.max_page_bytes)
        return FetchedPage(
            url=url,
            final_url=str(response.url),
            status=response.status_code,
            content_type=content_type,
            charset=charset,
            body=body,
            raw_digest=sha256_digest(body),
            redirects=tuple(redirects),
            connected_address=connected,
        )

    async def aclose(self) -> None:
        """Close the running loop's client (a later fetch opens a new one)."""
        state = self._loops.pop_current()
        if state is not None:
            await state.client.aclose()


class TrustedEndpoint:
    """An adapter's own API origin: trusted at exactly (scheme, host, port) of ``base_url``.

    That origin skips the address policy (a self-hosted SearXNG on 127.0.0.1 works
    without ``allowed_networks``); any other origin is refused with ``UnsafeURL``.
    ``path`` joins onto the base path (``http://h:1/v1`` + ``latest`` → ``/v1/latest``).
    No redirects are followed (3xx → ``UpstreamStatus``); non-2xx → ``UpstreamStatus``;
    a body that is not UTF-8 JSON → ``FetchError(reason="invalid_json")``. Bodies are
    bounded and the deadline is the fetcher's. After repeated failures the origin's circuit
    opens (``CircuitBreaker``): calls then fail at once, so failover is quick.
    """

    def __init__(
        self,
        base_url: str,
        network: NetworkSettings,
        *,
        resolver: Resolver | None = None,
        breaker: CircuitBreaker | None = None,
    ) -> None:
        base = check_url(base_url)
        self._breaker = breaker or CircuitBreaker()
        self._base_url = base_url
        self._base = base.copy_with(query=None, fragment=None)
        self._origin = _origin(base)
        self._network = network
        self._resolver = resolver
        self._ssl_context: ssl.SSLContext | None = None
        self._loops: _PerLoop[httpx.AsyncClient] = _PerLoop(self._new_client)

    @property
    def base_url(self) -> str:
        return self._base_url

    def _new_client(self) -> httpx.AsyncClient:
        _, host, port = self._origin
        self._ssl_context = self._ssl_context or _verifying_context(self._network)
        return guarded_client(
            self._network,
            headers=_headers(self._network, API_ACCEPT),
            resolver=self._resolver,
            trusted_origins=[(host, port)],
            max_connections=4,
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
        self, path: str, params: Mapping[str, str | int] | None = None
    ) -> ApiResponse:
        target = self._target(path, params)
        url = str(target)
        client = self._loops.get()
        with self._breaker.guard(self._origin[1], url):
            async with _deadline(url, self._network.timeout_s):
                response, body = await self._get(client, target, url)
        return ApiResponse(
            url=url,
            status=response.status_code,
            data=_parse_json(url, body),
            raw_digest=sha256_digest(body),
            body=body,
        )

    async def _get(
        self, client: httpx.AsyncClient, target: httpx.URL, url: str
    ) -> tuple[httpx.Response, bytes]:
        with _mapped_errors(url):
            async with client.stream("GET", target) as response:
                if not 200 <= response.status_code < 300:
                    raise UpstreamStatus(url, response.status_code)
                body = await read_body(response, url, self._network.max_page_bytes)
        return response, body

    async def get_bytes(
        self, path: str, params: Mapping[str, str | int] | None = None
    ) -> RawResponse:
        """Like ``get_json`` but the body comes back as bytes, whatever its type: same
        origin rule, no redirects (3xx → ``UpstreamStatus``), same bound and deadline.
        Anonymous: no Cookie header is sent, even if an earlier answer set one."""
        target = self._target(path, params)
        url = str(target)
        client = self._loops.get()
        with self._breaker.guard(self._origin[1], url):
            async with _deadline(url, self._network.timeout_s):
                with _mapped_errors(url):
                    request = client.build_request("GET", target)
                    request.headers.pop("cookie", None)
                    response = await client.send(request, stream=True)
                    try:
                        if not 200 <= response.status_code < 300:
                            raise UpstreamStatus(url, response.status_code)
                        content_type, charset = media_type(response)
                        body = await read_body(response, url, self._network.max_page_bytes)
                    finally:
                        await response.aclose()
        return RawResponse(
            url=url,
            status=response.status_code,
            content_type=content_type,
            charset=charset,
            body=body,
            raw_digest=sha256_digest(body),
        )

    async def aclose(self) -> None:
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
    configured base URL (created on first use, then reused). ``endpoint`` fits the
    adapters' ``EndpointFactory``; ``aclose()`` closes everything of the running loop.
    """

    def __init__(self, network: NetworkSettings, *, resolver: Resolver | None = None) -> None:
        self._network = network
        self._resolver = resolver
        self.fetcher = SafeFetcher(network, resolver=resolver)
        self._endpoints: dict[str, TrustedEndpoint] = {}

    def endpoint(self, base_url: str) -> TrustedEndpoint:
        endpoint = self._endpoints.get(base_url)
        if endpoint is None:
            endpoint = TrustedEndpoint(base_url, self._network, resolver=self._resolver)
            self._endpoints[base_url] = endpoint
        return endpoint

    async def aclose(self) -> None:
        await self.fetcher.aclose()
        for endpoint in self._endpoints.values():
            await endpoint.aclose()
