"""The address policy, enforced where the socket is opened.

Checking a URL string is not enough: resolvers accept legacy IPv4 notations
(``2130706433`` is 127.0.0.1) and DNS answers change between a check and a connect.
So the check lives in an httpcore network backend: ``GuardedBackend.connect_tcp``
resolves the host once, judges every answer (``policy.py``), and connects to the checked
IP literal. httpcore still uses the URL host for TLS SNI and certificate checks, and every
redirect hop opens a new connection, so it passes through here again.
"""

from __future__ import annotations

import asyncio
import http.cookiejar
import ipaddress
import socket
import ssl
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import httpcore
import httpx

from ..errors import BlockedDestination, FetchError, UnsafeURL
from ..settings import NetworkSettings
from ._policy import PUBLIC_PORTS, IPNetwork, Resolver, in_networks, ip_allowed, normalize_host
from ._stream import AsyncioBackend

__all__ = [
    "GuardedBackend",
    "guarded_backend",
    "guarded_client",
    "system_resolver",
    "verifying_context",
]


async def system_resolver(host: str, port: int) -> list[str]:
    """Resolve with the loop's ``getaddrinfo`` (in a thread; never blocks the loop)."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    addresses: list[str] = []
    for *_, sockaddr in infos:
        address = str(sockaddr[0])
        if address not in addresses:
            addresses.append(address)
    return addresses


class GuardedBackend(httpcore.AsyncNetworkBackend):
    """An httpcore backend that only opens TCP connections the policy allows.

    ``connect_tcp``: port check → ONE resolution → every address checked → connect to
    the checked addresses as IP literals, in order, until one answers. Refusals raise
    ``UnsafeURL`` (port) or ``BlockedDestination`` (address), with ``url`` set to
    ``host:port``; callers rebind them to the URL they were fetching. Unix sockets are
    always refused.

    ``connect_to`` (``"host:port" -> "host:port"``) first replaces the destination. Trust
    is decided on the original origin (a trusted origin skips the checks wherever it is
    sent); for any other origin every check applies to the replacement.
    """

    def __init__(
        self,
        *,
        allowed_networks: Sequence[IPNetwork] = (),
        resolve: Mapping[str, str] | None = None,
        resolver: Resolver | None = None,
        trusted_origins: Iterable[tuple[str, int]] = (),
        inner: httpcore.AsyncNetworkBackend | None = None,
        connect_to: Mapping[str, str] | None = None,
    ) -> None:
        self._allowed = tuple(allowed_networks)
        self._connect_to = {
            _split_host_port(origin): _split_host_port(target)
            for origin, target in (connect_to or {}).items()
        }
        self._resolve = {normalize_host(host): ip for host, ip in (resolve or {}).items()}
        self._resolver = resolver or system_resolver
        self._trusted = frozenset((normalize_host(host), port) for host, port in trusted_origins)
        self._inner = inner or AsyncioBackend()

    async def resolve(self, host: str, port: int) -> list[str]:
        """Addresses for ``host``: the ``resolve`` map, an IP literal as is, else the resolver."""
        name = normalize_host(host)
        if name in self._resolve:
            return [self._resolve[name]]
        try:
            ipaddress.ip_address(name)
        except ValueError:
            pass
        else:
            return [name]
        try:
            return list(await self._resolver(name, port))
        except (OSError, UnicodeError) as exc:  # gaierror is an OSError
            raise FetchError(f"{host}:{port}", str(exc), reason="resolve_failed") from None

    def check(self, host: str, port: int, addresses: Sequence[str]) -> None:
        """Raise unless every address may be reached on ``port``."""
        where = f"{host}:{port}"
        if not addresses:
            raise FetchError(where, "no addresses", reason="resolve_failed")
        for text in addresses:
            try:
                ip = ipaddress.ip_address(text)
            except ValueError:
                raise BlockedDestination(where, f"resolver returned {text!r}") from None
            if in_networks(ip, self._allowed):
                continue
            if not ip_allowed(ip):
                raise BlockedDestination(where, f"{host} resolves to {ip}, outside the policy")
            if port not in PUBLIC_PORTS:
                raise UnsafeURL(where, f"port {port} is not allowed for public address {ip}")

    async def admit(self, host: str, port: int) -> tuple[str, int, list[str]]:
        """What ``connect_tcp`` checks before it connects: the destination (after
        ``connect_to``) and its addresses, each one allowed; raises as ``connect_tcp`` does.
        A cached reply is used only after the same check passes for its origin now."""
        trusted = (normalize_host(host), port) in self._trusted
        host, port = self._connect_to.get((normalize_host(host), port), (host, port))
        if not trusted and port not in PUBLIC_PORTS and not self._allowed:
            raise UnsafeURL(f"{host}:{port}", f"port {port} is not allowed")
        addresses = await self.resolve(host, port)
        if not addresses:
            raise FetchError(f"{host}:{port}", "no addresses", reason="resolve_failed")
        if not trusted:
            self.check(host, port, addresses)
        return host, port, addresses

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        host, port, addresses = await self.admit(host, port)
        # Every address was checked above; try them in the resolver's order, so a name with
        # an unreachable first answer (an AAAA record on an IPv4-only host) still connects.
        failure: Exception | None = None
        for address in addresses:
            try:
                return await self._inner.connect_tcp(
                    address,
                    port,
                    timeout=timeout,
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        assert failure is not None
        raise failure

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise UnsafeURL(path, "unix sockets are not allowed")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def _split_host_port(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return normalize_host(host), int(port)


def guarded_backend(
    network: NetworkSettings,
    *,
    resolver: Resolver | None = None,
    trusted_origins: Iterable[tuple[str, int]] = (),
) -> GuardedBackend:
    """The guard for ``network``'s policy (what ``guarded_client`` connects through)."""
    return GuardedBackend(
        allowed_networks=network.allowed_networks,
        resolve=network.resolve,
        resolver=resolver,
        trusted_origins=trusted_origins,
        connect_to=network.connect_to,
    )


class _DeferredRoots(ssl.SSLContext):
    """A verifying client context that loads certifi's roots on its first TLS connection:
    parsing the bundle costs tens of milliseconds that a run over plain http (a loopback
    world, a local SearXNG, a local model server) never needs. Settings are those of
    ``ssl.create_default_context``."""

    _roots_file: str | None = None
    _roots_lock = threading.Lock()  # shared by all: taken once per context at most

    def _load_roots(self) -> None:
        if self._roots_file is None:
            return
        with self._roots_lock:
            if self._roots_file is not None:
                self.load_verify_locations(cafile=self._roots_file)
                self._roots_file = None

    def wrap_bio(self, *args: Any, **kwargs: Any) -> ssl.SSLObject:
        """``SSLContext.wrap_bio`` once the roots are loaded."""
        self._load_roots()
        return super().wrap_bio(*args, **kwargs)

    def wrap_socket(self, *args: Any, **kwargs: Any) -> ssl.SSLSocket:
        """``SSLContext.wrap_socket`` once the roots are loaded."""
        self._load_roots()
        return super().wrap_socket(*args, **kwargs)


def verifying_context(network: NetworkSettings) -> ssl.SSLContext:
    """The one TLS client context builder: certificates checked against certifi's roots
    (loaded on the first TLS connection) plus ``network.ca_bundle`` (if set, loaded now, so
    a bad file fails early); SSL_CERT_FILE and friends ignored."""
    import certifi  # only a context builder needs it

    context = _DeferredRoots(ssl.PROTOCOL_TLS_CLIENT)  # verify_mode and check_hostname set
    context._roots_file = certifi.where()
    if network.ca_bundle is not None:
        try:
            context.load_verify_locations(cafile=str(network.ca_bundle))
        except (OSError, ssl.SSLError) as exc:
            raise FetchError(
                str(network.ca_bundle), f"cannot load ca_bundle: {exc}", reason="ca_bundle_invalid"
            ) from None
    return context


def guarded_client(
    network: NetworkSettings,
    *,
    headers: Mapping[str, str],
    resolver: Resolver | None = None,
    trusted_origins: Iterable[tuple[str, int]] = (),
    max_connections: int = 16,
    ssl_context: ssl.SSLContext | None = None,
) -> httpx.AsyncClient:
    """An ``httpx.AsyncClient`` whose every connection goes through ``GuardedBackend``:
    the one way this package builds an HTTP client (the page fetcher, trusted endpoints
    and the model client alike). ``ssl_context`` defaults to ``verifying_context(network)``;
    a caller that opens clients often builds that once and passes it.

    httpx has no resolver hook, so the transport's private ``_pool`` is replaced by a
    pool built with the guarded backend; the SSL context and limits are passed again
    explicitly so nothing falls back to defaults. (Pinned: httpx 0.28, httpcore 1.0; a
    test fails if the wiring stops taking effect.) No proxies from the environment, no
    HTTP/2, certificates verified, no automatic redirects, no cookies kept (fetches stay
    anonymous and independent of each other), and no keep-alive: a client left behind by
    a closed event loop then holds no sockets, and every request resolves and checks
    afresh.
    """
    context = ssl_context or verifying_context(network)
    limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=0)
    backend = guarded_backend(network, resolver=resolver, trusted_origins=trusted_origins)
    transport = httpx.AsyncHTTPTransport(
        verify=context, trust_env=False, http1=True, http2=False, limits=limits
    )
    transport._pool = httpcore.AsyncConnectionPool(
        ssl_context=context,
        max_connections=limits.max_connections,
        max_keepalive_connections=limits.max_keepalive_connections,
        keepalive_expiry=limits.keepalive_expiry,
        http1=True,
        http2=False,
        retries=0,
        network_backend=backend,
    )
    return _AnonymousClient(
        transport=transport,
        trust_env=False,
        follow_redirects=False,
        timeout=httpx.Timeout(network.timeout_s),
        headers=dict(headers),
    )


class _EmptyJar(http.cookiejar.CookieJar):
    """A cookie jar that holds nothing: a cookie set on it is dropped."""

    def set_cookie(self, cookie: http.cookiejar.Cookie) -> None:
        return None


class _NoCookies(httpx.Cookies):
    """A cookie store that holds no cookie (an ``_EmptyJar``: what a caller adds is dropped)
    and never reads a reply's ``Set-Cookie``. httpx hands every reply to its client's store,
    and building the ``http.cookiejar`` view of a reply only to refuse its cookies cost more
    than reading the rest of its headers."""

    def __init__(self) -> None:
        super().__init__(_EmptyJar())

    def extract_cookies(self, response: httpx.Response) -> None:
        return None


class _AnonymousClient(httpx.AsyncClient):
    """An ``httpx.AsyncClient`` whose cookie store is a ``_NoCookies``, whatever is set."""

    def __init__(self, **kwargs: Any) -> None:
        self._no_cookies = _NoCookies()
        super().__init__(**kwargs)

    @property
    def cookies(self) -> httpx.Cookies:
        return self._no_cookies

    @cookies.setter
    def cookies(self, cookies: Any) -> None:
        self._no_cookies = _NoCookies()
