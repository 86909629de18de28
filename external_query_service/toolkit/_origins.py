"""Caller-given origins: the only places web tools may open, follow or be redirected to.

An origin is ``scheme://host[:port]`` (http or https, no path, query, fragment or
credentials). A URL is inside when its scheme, host (lower case, IDNA, no trailing dot)
and port (the scheme's default when absent) equal one origin's exactly: no subdomain or
"same site" widening.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import httpx

from ..errors import InputError
from ..net._policy import normalize_host

__all__ = ["Origin", "OriginSet", "parse_origin"]

_DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True, order=True)
class Origin:
    """A scheme, host and port; ``str()`` leaves a default port out."""

    scheme: str
    host: str
    port: int

    def __str__(self) -> str:
        default = _DEFAULT_PORTS[self.scheme] == self.port
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}" + ("" if default else f":{self.port}")


def _origin_of(url: httpx.URL) -> Origin | None:
    if url.scheme not in _DEFAULT_PORTS or not url.raw_host:
        return None
    host = normalize_host(url.raw_host.decode("ascii", errors="replace"))
    return Origin(url.scheme, host, url.port or _DEFAULT_PORTS[url.scheme])


def parse_origin(text: str) -> Origin:
    """``InputError`` unless ``text`` is exactly an http(s) origin."""
    try:
        url = httpx.URL(text.strip())
    except (httpx.InvalidURL, TypeError) as exc:
        raise InputError(f"not an origin: {text!r} ({exc})") from None
    origin = _origin_of(url)
    if origin is None:
        raise InputError(f"not an http(s) origin: {text!r}")
    if url.userinfo or url.query or url.fragment or url.path not in ("", "/"):
        raise InputError(f"an origin has no path, query, fragment or credentials: {text!r}")
    return origin


class OriginSet:
    """A fixed, non-empty set of origins; ``allows(url)`` is an exact origin match."""

    def __init__(self, origins: Iterable[str | Origin]) -> None:
        parsed = frozenset(
            item if isinstance(item, Origin) else parse_origin(item) for item in origins
        )
        if not parsed:
            raise InputError("allowed_origins must name at least one origin")
        self._origins = parsed

    def origin_of(self, url: str) -> Origin | None:
        """The origin of ``url``, or None when it is not a URL with one."""
        try:
            return _origin_of(httpx.URL(url))
        except (httpx.InvalidURL, TypeError):
            return None

    def allows(self, url: str) -> bool:
        """Whether ``url``'s origin is in the set."""
        return self.origin_of(url) in self._origins

    def as_strings(self) -> tuple[str, ...]:
        """The origins as sorted strings."""
        return tuple(str(origin) for origin in sorted(self._origins))
