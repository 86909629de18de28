"""Faults a world can inject on a route, and what each one looks like on the wire.

| fault              | on the wire                                | what the chain records        |
|--------------------|--------------------------------------------|-------------------------------|
| ``http_500``       | 500 with a JSON error body                 | attempt ``failed``            |
| ``refused``        | the origin's port refuses connections      | ``failed``, connect_failed    |
| ``reset``          | the connection closes without an answer    | ``failed``, protocol_error    |
| ``slow_body``      | 200, then one byte every 0.2 s             | deadline_exceeded             |
| ``drip``           | 200, then one byte a second (rate settable)| page ``cut_off``              |
| ``hang``           | nothing until the client gives up          | deadline_exceeded             |
| ``oversized``      | 200, then 64 KiB blocks up to 64 MiB       | page ``content_too_large``    |
| ``redirect_private`` | 302 to the cloud metadata address        | page ``blocked_destination``  |
| ``blocked``        | the origin "resolves" to a refused address | page ``blocked_destination``  |
| ``binary``         | 200 ``application/octet-stream``, noise    | page ``unsupported_content``  |
| ``gzip_bomb``      | 200 gzip that inflates to 64 MiB of zeros  | page ``content_too_large``    |
| ``redirect_loop``  | 302 to itself, forever                     | page ``too_many_redirects``   |

``drip`` sends ``drip_bytes_per_s`` bytes a second (default 1, ``DRIP_BYTES_PER_S``) of an
page; ``World.fault(url, "drip", drip_bytes_per_s=...)`` sets the rate.
``latency_ms`` (any route) delays the status line; beyond the per-question
``deadline_s`` the attempt is a ``timeout``. ``refused`` and ``blocked`` act on the whole
origin (``host:port``) through ``[network] connect_to``; the others on one route.
A search result's page failure is recorded with its class (``adapters/_pages.py``): e.g.
``slow_body`` is ``cut_off``, ``hang`` is ``no_response:deadline_exceeded``.
"""

from __future__ import annotations

import functools
import json
import random
import struct
import zlib
from collections.abc import Iterator
from typing import Literal, get_args

from .server import Reply

__all__ = [
    "BLOCKED_ADDRESS",
    "DRIP_BYTES_PER_S",
    "FAULTS",
    "ORIGIN_FAULTS",
    "PRIVATE_REDIRECT",
    "Fault",
    "fault_reply",
]

Fault = Literal[
    "http_500",
    "refused",
    "reset",
    "slow_body",
    "drip",
    "hang",
    "oversized",
    "redirect_private",
    "blocked",
    "binary",
    "gzip_bomb",
    "redirect_loop",
]
FAULTS: tuple[str, ...] = get_args(Fault)
#: Faults that act on an origin (``host:port``), not on one route.
ORIGIN_FAULTS = frozenset({"refused", "blocked"})

#: Where ``redirect_private`` points: the cloud metadata service, never in a world's
#: ``allowed_networks``.
PRIVATE_REDIRECT = "http://169.254.169.254/latest/meta-data/"
#: Where a ``blocked`` origin connects: TEST-NET-1, outside every policy, never reached.
BLOCKED_ADDRESS = "192.0.2.1"

#: How fast ``drip`` sends, unless told otherwise: one byte a second.
DRIP_BYTES_PER_S = 1.0

#: Long enough to outlast any client deadline; the server's stop ends it early.
_HANG_S = 3600.0
_DRIP_S = 0.2
_OVERSIZED_BLOCK = 64 * 1024
_OVERSIZED_BLOCKS = 1024
_MIB = 1024 * 1024
_BOMB_MIB = 64
#: gzip magic, deflate, no flags, no mtime, no extra flags, unknown OS.
_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
_NOISE_BYTES = 4096


def _drip() -> Iterator[bytes]:
    for _ in range(3000):
        yield b" "


def _page_drip() -> Iterator[bytes]:
    """The start of a page, then spaces: one byte at a time, an hour's worth at one a second
    (a client that stops reading ends it sooner)."""
    for byte in b"<html><body><p>":
        yield bytes([byte])
    for _ in range(3600):
        yield b" "


def _oversized() -> Iterator[bytes]:
    block = b"<p>" + b"x" * (_OVERSIZED_BLOCK - 7) + b"</p>\n"
    for _ in range(_OVERSIZED_BLOCKS):
        yield block


def _gzip_bomb() -> Iterator[bytes]:
    """64 MiB of zeros as gzip in about 64 KiB: a header, one compressed MiB sent again and
    again, and the trailer (computed only if a client reads that far)."""
    block = _zeros_block()
    yield _GZIP_HEADER
    for _ in range(_BOMB_MIB):
        yield block
    zeros, crc = bytes(_MIB), 0
    for _ in range(_BOMB_MIB):
        crc = zlib.crc32(zeros, crc)
    last = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS).flush()  # empty final block
    yield last + struct.pack("<II", crc, (_BOMB_MIB * _MIB) & 0xFFFFFFFF)


@functools.cache
def _zeros_block() -> bytes:
    """1 MiB of zeros as raw deflate blocks that end on a byte boundary (full flush) and
    refer only to their own bytes (a fresh compressor), so copies can follow each other.
    Built once: compressing every MiB for every request would cost seconds of test time."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    return compressor.compress(bytes(_MIB)) + compressor.flush(zlib.Z_FULL_FLUSH)


def _noise() -> bytes:
    # Fixed seed: the same bytes every run, so a world stays reproducible.
    return random.Random(0).randbytes(_NOISE_BYTES)


def fault_reply(
    fault: Fault,
    *,
    content_type: str | None = None,
    path: str = "/",
    drip_bytes_per_s: float = DRIP_BYTES_PER_S,
) -> Reply:
    """The reply that produces ``fault`` on one route (origin faults have none). ``path`` is
    the request's own path and query, where ``redirect_loop`` points back to;
    ``drip_bytes_per_s`` is ``drip``'s rate (more than zero)."""
    if fault == "http_500":
        body = json.dumps({"error": "search error"}).encode()
        return Reply(status=500, body=body, content_type="application/json")
    if fault == "reset":
        return Reply(drop=True)
    if fault == "hang":
        return Reply(drop=True, delay_s=_HANG_S)
    if fault == "slow_body":
        return Reply(
            content_type=content_type or "text/html; charset=utf-8",
            chunks=_drip(),
            chunk_delay_s=_DRIP_S,
        )
    if fault == "drip":
        if not drip_bytes_per_s > 0:
            raise ValueError(f"drip_bytes_per_s must be more than zero, not {drip_bytes_per_s}")
        return Reply(
            content_type=content_type or "text/html; charset=utf-8",
            chunks=_page_drip(),
            chunk_delay_s=1 / drip_bytes_per_s,
        )
    if fault == "oversized":
        return Reply(content_type=content_type or "text/html; charset=utf-8", chunks=_oversized())
    if fault == "redirect_private":
        return Reply(status=302, content_type=None, headers={"Location": PRIVATE_REDIRECT})
    if fault == "binary":
        return Reply(body=_noise(), content_type=content_type or "application/octet-stream")
    if fault == "gzip_bomb":
        return Reply(
            content_type=content_type or "text/html; charset=utf-8",
            headers={"Content-Encoding": "gzip"},
            chunks=_gzip_bomb(),
        )
    if fault == "redirect_loop":
        return Reply(status=302, content_type=None, headers={"Location": path})
    raise ValueError(f"{fault} acts on the origin, not on a route")
