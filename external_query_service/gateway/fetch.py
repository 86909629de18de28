"""The safe fetcher: the one way any URL that comes from outside is fetched.

(Contract stub; the implementation lands with the fetcher slice.)
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import JsonValue

__all__ = ["ApiResponse", "FetchedPage"]


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
