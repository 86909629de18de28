"""The address policy, enforced where the socket is opened.

Checking a URL string is not enough: resolvers accept legacy IPv4 notations
(``2130706433`` is 127.0.0.1) and DNS answers change between a check and a connect.
So the check lives in an httpcore network backend: ``GuardedBackend.connect_tcp``
resolves the host once, judges every answer, and connects to the checked IP literal.
httpcore still uses the URL host for TLS SNI and certificate checks, and every
redirect hop opens a new connection, so it passes through here again.

Policy (strict, stated so tests can pin it):

- An address inside ``[network] allowed_networks`` is allowed, on any port. That is how
  tests reach servers on high ports of 127.0.0.1, and how an operator admits a LAN.
- Any other address must be global unicast (``ip_allowed``), and only on the web ports
  ``PUBLIC_PORTS``. With no ``allowed_networks`` a port outside them is refused before
  any resolution.
- If ANY resolved address is refused, the host is refused (no "pick a good one").
- ``[network] resolve`` (host → IP, like ``curl --resolve``) answers before the resolver.
- ``[network] connect_to`` (``host:port`` → ``host:port``, like ``curl --connect-to``) swaps
  the destination before anything else; the policy then judges the swapped one.
- Trusted origins (an adapter's own configured endpoint) skip the address and port
  policy for that exact (host, port); nothing else does.
"""

from __future__ import annotations

import asyncio
import http.cookiejar
import ipaddress
import socket
import ssl
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence

import httpcore
import httpx

from ..errors import BlockedDestination, FetchError, UnsafeURL
from ..settings import NetworkSettings

__all__ = [
    "PUBLIC_PORTS",
    "GuardedBackend",
    "IPAddress",
    "IPNetwork",
    "Resolver",
    "guarded_client",
    "ip_allowed",
    "normalise_host",
    "system_resolver",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

#: ``(host, port) -> addresses``; injectable so tests can play DNS.
Resolver = Callable[[str, int], Awaitable[list[str]]]

#: Ports a public address may be reached on; addresses inside allowed_networks take any.
PUBLIC_PORTS = frozenset({80, 443, 8000, 8080, 8443})

# Ranges refused even where ``is_global`` says otherwise. ``is_global`` alone is not
# enough: on 3.11 it calls NAT64, 6to4, IPv4-compatible, site-local and multicast
# addresses global, and its tables changed between patch releases (CVE-2024-4032).
_BLOCKED_V4 = tuple(
    ipaddress.IPv4Network(net)
    for net in (
        "0.0.0.0/8",  # "this network"
        "10.0.0.0/8",
        "100.64.0.0/10",  # CGNAT shared space
        "127.0.0.0/8",
        "169.254.0.0/16",  # link-local, cloud metadata at 169.254.169.254
        "172.16.0.0/12",
        "192.0.0.0/24",  # IETF protocol assignments
        "192.0.2.0/24",  # documentation
        "192.88.99.0/24",  # 6to4 relay anycast
        "192.168.0.0/16",
        "198.18.0.0/15",  # benchmarking
        "198.51.100.0/24",
        "203.0.113.0/24",
        "224.0.0.0/4",  # multicast
        "240.0.0.0/4",  # reserved, includes 255.255.255.255
    )
)
_BLOCKED_V6 = tuple(
    ipaddress.IPv6Network(net)
    for net in (
        "::/96",  # IPv4-compatible (also :: and ::1)
        "64:ff9b::/96",  # NAT64 well-known prefix
        "64:ff9b:1::/48",  # local-use NAT64
        "100::/64",  # discard
        "2001::/23",  # IETF protocol assignments, incl. Teredo 2001::/32
        "2001:db8::/32",  # documentation
        "2002::/16",  # 6to4
        "3fff::/20",  # documentation
        "5f00::/16",  # SRv6 SIDs
        "fc00::/7",  # unique local
        "fe80::/10",  # link-local
        "fec0::/10",  # site-local (deprecated)
        "ff00::/8",  # multicast
    )
)


def ip_allowed(address: str | IPAddress, allowed_networks: Sequence[IPNetwork] = ()) -> bool:
    """True when ``address`` may be connected to.

    Inside one of ``allowed_networks``: allowed. Otherwise only global unicast, judged
    independently of the Python patch level; an IPv4-mapped IPv6 address is judged as
    the IPv4 address it carries. Ports are not considered here. A string that is not an
    IP address is refused.
    """
    try:
        ip = ipaddress.ip_address(address) if isinstance(address, str) else address
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.scope_id:
            ip = ipaddress.IPv6Address(str(ip).split("%", 1)[0])
        if ip.ipv4_mapped is not None:
            return ip_allowed(ip.ipv4_mapped, allowed_networks)
    if any(ip.version == net.version and ip in net for net in allowed_networks):
        return True
    blocked: Sequence[IPNetwork] = _BLOCKED_V4 if ip.version == 4 else _BLOCKED_V6
    if any(ip in net for net in blocked):
        return False
    return ip.is_global and not ip.is_multicast


def _in_networks(ip: IPAddress, networks: Sequence[IPNetwork]) -> bool:
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return any(ip.version == net.version and ip in net for net in networks)


def normalise_host(host: str) -> str:
    """The form hosts are compared in: lower case, no trailing dot, no IPv6 brackets."""
    return host.strip("[]").lower().rstrip(".")


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
        self._resolve = {normalise_host(host): ip for host, ip in (resolve or {}).items()}
        self._resolver = resolver or system_resolver
        self._trusted = frozenset((normalise_host(host), port) for host, port in trusted_origins)
        self._inner = inner or httpcore.AnyIOBackend()

    async def resolve(self, host: str, port: int) -> list[str]:
        """Addresses for ``host``: the ``resolve`` map, an IP literal as is, else the resolver."""
        name = normalise_host(host)
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
            if _in_networks(ip, self._allowed):
                continue
            if not ip_allowed(ip):
                raise BlockedDestination(where, f"{host} resolves to {ip}, outside the policy")
            if port not in PUBLIC_PORTS:
                raise UnsafeURL(where, f"port {port} is not allowed for public address {ip}")

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        trusted = (normalise_host(host), port) in self._trusted
        host, port = self._connect_to.get((normalise_host(host), port), (host, port))
        if not trusted and port not in PUBLIC_PORTS and not self._allowed:
            raise UnsafeURL(f"{host}:{port}", f"port {port} is not allowed")
        addresses = await self.resolve(host, port)
        if not addresses:
            raise FetchError(f"{host}:{port}", "no addresses", reason="resolve_failed")
        if not trusted:
            self.check(host, port, addresses)
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
    return normalise_host(host), int(port)


def guarded_client(
    network: NetworkSettings,
    *,
    headers: Mapping[str, str],
    resolver: Resolver | None = None,
    trusted_origins: Iterable[tuple[str, int]] = (),
    max_connections: int = 16,
    ssl_context: ssl.SSLContext | None = None,
) -> httpx.AsyncClient:
    """An ``httpx.AsyncClient`` whose every connection goes through ``GuardedBackend``.

    httpx has no resolver hook, so the transport's private ``_pool`` is replaced by a
    pool built with the guarded backend; the SSL context and limits are passed again
    explicitly so nothing falls back to defaults. (Pinned: httpx 0.28, httpcore 1.0; a
    test fails if the wiring stops taking effect.) No proxies from the environment, no
    HTTP/2, certificates verified, no automatic redirects, no cookies kept (fetches stay
    anonymous and independent of each other), and no keep-alive: a client left behind by
    a closed event loop then holds no sockets, and every request resolves and checks
    afresh.
    """
    context = ssl_context or httpx.create_ssl_context(verify=True, trust_env=False)
    limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=0)
    backend = GuardedBackend(
        allowed_networks=network.allowed_networks,
        resolve=network.resolve,
        resolver=resolver,
        trusted_origins=trusted_origins,
        connect_to=network.connect_to,
    )
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
    return httpx.AsyncClient(
        transport=transport,
        trust_env=False,
        follow_redirects=False,
        timeout=httpx.Timeout(network.timeout_s),
        headers=dict(headers),
        # An empty allowed_domains list refuses every cookie, set or sent.
        cookies=http.cookiejar.CookieJar(http.cookiejar.DefaultCookiePolicy(allowed_domains=[])),
    )
