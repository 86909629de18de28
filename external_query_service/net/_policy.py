"""The address policy as pure functions: which addresses and hosts may be reached.

``backend.py`` enforces it where the socket is opened; the verifier and the toolkit apply
the same rules to URL strings.

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

import ipaddress
from collections.abc import Awaitable, Callable, Sequence

__all__ = [
    "PUBLIC_PORTS",
    "IPAddress",
    "IPNetwork",
    "Resolver",
    "in_networks",
    "ip_allowed",
    "normalize_host",
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


def in_networks(ip: IPAddress, networks: Sequence[IPNetwork]) -> bool:
    """True when ``ip`` (or the IPv4 address an IPv4-mapped one carries) is in ``networks``."""
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return any(ip.version == net.version and ip in net for net in networks)


def normalize_host(host: str) -> str:
    """The one form hosts are compared in: no surrounding white space or IPv6 brackets, lower
    case, no trailing dot, and the IDNA (punycode) form when the name converts cleanly."""
    host = host.strip().strip("[]").lower().rstrip(".")
    try:
        return host.encode("idna").decode("ascii")
    except UnicodeError:
        return host
