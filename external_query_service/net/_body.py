"""Response bodies: Content-Encoding undone by hand so decoded size stays bounded too."""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from typing import Any

import httpx

from ..errors import ContentTooLarge, FetchError, UnsupportedContent

__all__ = ["DECODE_CHUNK", "BoundedDecoder", "content_coding", "media_type", "read_body"]

#: Largest piece one decompression step may produce, so a bomb never lands at once.
DECODE_CHUNK = 64 * 1024


class BoundedDecoder:
    """Undo one Content-Encoding layer without ever producing more than DECODE_CHUNK at once.

    httpx's own decoders call ``decompress(data)`` without a bound (a 64 KiB read can
    become 64 MiB), so bodies are read raw and decoded here.
    """

    def __init__(self, coding: str | None) -> None:
        self._raw_fallback = coding == "deflate"
        self._zlib: Any = None
        if coding in ("gzip", "x-gzip"):
            self._zlib = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif coding == "deflate":
            self._zlib = zlib.decompressobj(zlib.MAX_WBITS)

    def feed(self, data: bytes) -> Iterator[bytes]:
        """The decoded bytes of ``data``, in pieces; raises when the decoded total would pass
        the cap."""
        if self._zlib is None:
            if data:
                yield data
            return
        pending = data
        while pending or not self._zlib.eof:
            try:
                out = self._zlib.decompress(pending, DECODE_CHUNK)
            except zlib.error:
                if not self._raw_fallback:
                    raise
                # "deflate" sent as a raw stream without the zlib wrapper (common).
                self._raw_fallback = False
                self._zlib = zlib.decompressobj(-zlib.MAX_WBITS)
                out = self._zlib.decompress(pending, DECODE_CHUNK)
            self._raw_fallback = False
            if out:
                yield out
            pending = self._zlib.unconsumed_tail
            if not pending and len(out) < DECODE_CHUNK:
                break  # input used up and nothing held back inside zlib

    @property
    def complete(self) -> bool:
        """Whether the compressed stream has ended (always True for an identity body)."""
        return self._zlib is None or bool(self._zlib.eof)


def content_coding(response: httpx.Response, url: str) -> str | None:
    """The response's one content coding (``gzip``, ``x-gzip``, ``deflate``) or None;
    several codings, or any other, are ``UnsupportedContent``."""
    codings = [
        item.strip().lower()
        for item in response.headers.get_list("content-encoding", split_commas=True)
        if item.strip() and item.strip().lower() != "identity"
    ]
    if len(codings) > 1:
        raise UnsupportedContent(url, f"more than one content coding: {', '.join(codings)}")
    if codings and codings[0] not in ("gzip", "x-gzip", "deflate"):
        raise UnsupportedContent(url, f"content coding {codings[0]!r} is not read")
    return codings[0] if codings else None


async def read_body(response: httpx.Response, url: str, cap: int) -> bytes:
    """The body after Content-Encoding, raw and decoded bytes both capped at ``cap``."""
    declared = response.headers.get("content-length")
    if declared is not None and declared.strip().isdigit() and int(declared) > cap:
        raise ContentTooLarge(url, f"declared {declared} bytes, cap {cap}")
    decoder = BoundedDecoder(content_coding(response, url))
    parts: list[bytes] = []
    raw_total = decoded_total = 0
    try:
        async for chunk in response.aiter_raw():
            raw_total += len(chunk)
            if raw_total > cap:
                raise ContentTooLarge(url, f"more than {cap} bytes received")
            for piece in decoder.feed(chunk):
                decoded_total += len(piece)
                if decoded_total > cap:
                    raise ContentTooLarge(url, f"more than {cap} bytes after decoding")
                parts.append(piece)
    except zlib.error as exc:
        raise FetchError(url, f"bad compressed body: {exc}", reason="decoding_failed") from None
    if not decoder.complete:
        raise FetchError(url, "compressed body ends early", reason="decoding_failed")
    return b"".join(parts)


def media_type(response: httpx.Response) -> tuple[str, str | None]:
    """The response's media type and charset, both lowercased (charset None when absent)."""
    header = response.headers.get("content-type", "")
    media, _, params = header.partition(";")
    charset = None
    for param in params.split(";"):
        key, _, value = param.partition("=")
        if key.strip().lower() == "charset" and value.strip().strip("\"'"):
            charset = value.strip().strip("\"'").lower()
    return media.strip().lower(), charset
