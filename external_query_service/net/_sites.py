"""Where evidence comes from: host names, registrable domains and the origin check.

Independent sources are distinct registrable domains (``news.example.com`` and
``www.example.com`` are one site). The public-suffix list ships inside the
``publicsuffixlist`` package and is never fetched.

The origin check reads only the URL string: the gateway already checked the address it
actually connected to. Here the verifier re-applies the policy a reader can see in the URL —
scheme, allow/deny lists and IP literals — so that nothing slips in through a path that skipped
the fetcher.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from functools import cache
from typing import Literal
from urllib.parse import urlsplit

from ..models import ProviderType
from ..settings import NetworkSettings, SourceSettings
from ._policy import ip_allowed, normalize_host

__all__ = [
    "DOCS_SCHEME",
    "OriginReason",
    "check_origin",
    "domain_matches",
    "ip_literal",
    "registrable_domain",
    "source_allowed",
    "url_host",
    "url_host_port",
]

OriginReason = Literal["ok", "bad_scheme", "denied_domain", "not_allowed_domain", "private_address"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True)
class _SuffixRules:
    """The Public Suffix List's rules (as written: Unicode, ``*.`` wildcards, ``!``
    exceptions) and the most labels a rule has."""

    rules: frozenset[str]
    max_labels: int


@cache
def _suffix_rules() -> _SuffixRules:
    """The list bundled with ``publicsuffixlist``, read once on first use: one pass over its
    lines (the package's own parser also encodes every rule to IDNA, several times slower;
    hosts are decoded for the lookup instead, ``_public_labels``)."""
    import publicsuffixlist

    with open(publicsuffixlist.PSLFILE, encoding="utf-8") as source:
        lines = source.read().lower().splitlines()
    rules = {line.split(" ", 1)[0].rstrip() for line in lines if not line.startswith("//")}
    rules.discard("")
    return _SuffixRules(frozenset(rules), max(rule.count(".") + 1 for rule in rules))


def _public_labels(labels: list[str]) -> int:
    """How many trailing ``labels`` are the public suffix, by the list's rules: an exception
    (``!``) beats a wildcard (``*.``), which beats an exact rule, longest first; a name under
    no rule has its last label as suffix. The same algorithm as ``publicsuffixlist``."""
    table = _suffix_rules()
    count = len(labels)
    if count == 1:
        return 1
    for start in range(max(0, count - (table.max_labels + 1)), count):
        depth = count - start
        name = ".".join(labels[start:])
        if "!" + name in table.rules:
            return depth - 1
        if "*." + name in table.rules:
            return depth + 1 if start > 0 else depth
        if name in table.rules:
            return depth
    return 1


def _unicode_labels(host: str) -> list[str]:
    """``host``'s labels, A-labels (``xn--``) decoded so they meet the list's Unicode rules;
    a label that does not decode is kept as it is."""
    labels = host.split(".")
    if "xn--" not in host:
        return labels
    decoded = []
    for label in labels:
        try:
            decoded.append(label.encode("ascii").decode("idna") if "xn--" in label else label)
        except UnicodeError:
            decoded.append(label)
    return decoded


def url_host(url: str) -> str:
    """The normalized host of a URL, or ``""`` when it has none (or cannot be parsed)."""
    try:
        host = urlsplit(url).hostname
    except ValueError:
        return ""
    return normalize_host(host) if host else ""


def url_host_port(url: str) -> str:
    """``url_host`` with the port the URL names, if it names one (``searx.lan:8888``,
    ``[::1]:8080``): what a reader needs to find the endpoint that failed."""
    host = url_host(url)
    try:
        port = urlsplit(url).port
    except ValueError:
        port = None
    if not host or port is None:
        return host
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def ip_literal(host: str) -> IPAddress | None:
    """The address a host string spells, or None when it is a name.

    Legacy IPv4 spellings (``2130706433``, ``0x7f.1``) count: ``inet_aton`` parses them the way
    the system resolver would, without any lookup.
    """
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        pass
    try:
        return ipaddress.IPv4Address(socket.inet_aton(host))
    except (OSError, ValueError):
        return None


def registrable_domain(host: str) -> str:
    """The registrable domain (``a.b.example.co.uk`` → ``example.co.uk``).

    IP literals, single-label hosts (``localhost``) and bare public suffixes return the
    normalized host itself; names under a suffix the list does not know use its last label as
    the suffix (``a.news-a.test`` → ``news-a.test``).
    """
    host = normalize_host(host)
    if ip_literal(host) is not None or "." not in host:
        return host
    labels = host.split(".")
    if "" in labels:
        return host
    public = _public_labels(_unicode_labels(host))
    if len(labels) < public + 1:
        return host
    return ".".join(labels[-(public + 1) :])


def domain_matches(host: str, domain: str) -> bool:
    """True when ``host`` is ``domain`` or any subdomain of it."""
    host, domain = normalize_host(host), normalize_host(domain)
    return bool(domain) and (host == domain or host.endswith("." + domain))


#: The scheme of local document references (``docs://<adapter id>/<path>``).
DOCS_SCHEME = "docs"


def check_origin(
    url: str,
    *,
    provider_type: ProviderType,
    sources: SourceSettings,
    network: NetworkSettings,
) -> OriginReason:
    """Judge a URL's origin; ``"ok"`` or the first reason it fails.

    A ``fact_api`` URL is a configured endpoint: it still needs http/https, but the allow/deny
    lists and the IP-literal policy are for URLs from outside, not for endpoints the operator
    configured. A ``doc_search`` URL must be a local document reference (``docs://``); web
    URLs from a document adapter are not its to vouch for.
    """
    try:
        scheme = urlsplit(url).scheme.lower()
    except ValueError:
        return "bad_scheme"
    host = url_host(url)
    if not host:
        return "bad_scheme"
    if provider_type == "doc_search":
        return "ok" if scheme == DOCS_SCHEME else "bad_scheme"
    if scheme not in ("http", "https"):
        return "bad_scheme"
    if provider_type == "fact_api":
        return "ok"
    listed = _list_reason(host, sources)
    if listed != "ok":
        return listed
    address = ip_literal(host)
    if address is not None and not ip_allowed(address, network.allowed_networks):
        return "private_address"
    return "ok"


def source_allowed(host: str, sources: SourceSettings) -> bool:
    """True when the allow/deny lists let ``host`` through (the gateway asks before fetching)."""
    return _list_reason(host, sources) == "ok"


def _list_reason(host: str, sources: SourceSettings) -> OriginReason:
    if any(domain_matches(host, domain) for domain in sources.deny_domains):
        return "denied_domain"
    if sources.allow_domains and not any(
        domain_matches(host, domain) for domain in sources.allow_domains
    ):
        return "not_allowed_domain"
    return "ok"
