"""Does a text repeat a credential? The one check for what comes back from outside.

A provider that echoes its API key (in a result URL, a redirect it leads to, a title, a
reply) must not get the key into the answer, the evidence, the cache, the audit or the
logs. The check looks at a text in every form a reader or a program could turn it back
into the key:

- as sent, and as a reader sees it: invisible characters dropped (they could split the
  key), NFKC-folded (full-width letters read as the key too);
- decoded until nothing changes: percent-escapes (``%252D`` is ``%2D`` is ``-``) and HTML
  character references (``&#x2d;``, ``&amp;#45;``), in any order and nesting, the
  invisible characters dropped after each round (a ``&#8203;`` splitting the key);
- base64, standard or URL-safe: the key's encoding at each of the three byte alignments
  it can take inside a longer run, with the characters its neighbours change left off,
  is looked for in every decoded form (so the key base64-encoded alone, or inside a
  token, in a path or a query, is found without decoding the run).

It returns a bool, so no raised exception's frame holds the key.
"""

from __future__ import annotations

import base64
import html
import unicodedata
from collections.abc import Iterable
from urllib.parse import unquote

from ._visible import strip_invisible

__all__ = ["SECRET_IN_RESULT", "repeats_credential"]

#: The audit reason for a search hit or page dropped because it carries a credential.
SECRET_IN_RESULT = "secret_in_result"

#: Rounds of decoding at most: each round undoes one layer of percent-escapes and character
#: references, so this is how deep a nesting is followed (no real URL nests this deep).
_MAX_ROUNDS = 16


def _forms(text: str) -> tuple[str, ...]:
    """``text`` and every form decoding makes of it (module docstring), each once."""
    seen = dict.fromkeys((text,))
    current = text
    for _ in range(_MAX_ROUNDS):
        visible = strip_invisible(current)
        folded = unicodedata.normalize("NFKC", visible)
        decoded = strip_invisible(html.unescape(unquote(folded, errors="surrogateescape")))
        seen.update(dict.fromkeys((visible, folded, decoded)))
        if decoded == current:
            break
        current = decoded
    return tuple(seen)


def _base64_cores(key: str) -> tuple[str, ...]:
    """What of ``key``'s base64 encoding does not depend on its neighbours: for each of the
    three byte offsets the key can start at, the characters wholly made of its own bits, in
    the standard and the URL-safe alphabet."""
    raw = key.encode("utf-8")
    cores: list[str] = []
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + raw).decode("ascii").rstrip("=")
        # The first ``ceil(shift * 4 / 3)`` characters carry the neighbour's bits; so does
        # the last one when the key does not end on a 3-byte boundary.
        start = -(-shift * 4 // 3)
        end = len(encoded) - (1 if (shift + len(raw)) % 3 else 0)
        core = encoded[start:end]
        if len(core) >= 4:
            cores.append(core)
            cores.append(core.translate(_URL_SAFE))
    return tuple(dict.fromkeys(cores))


_URL_SAFE = str.maketrans("+/", "-_")


def repeats_credential(texts: Iterable[str], credentials: Iterable[str]) -> bool:
    """Does any of ``texts``, in any decoded form (module docstring), contain one of
    ``credentials`` or its base64 encoding (empty credentials never match)?"""
    keys = tuple(key for key in credentials if key)
    if not keys:
        return False
    needles = tuple(dict.fromkeys(n for key in keys for n in (key, *_base64_cores(key))))
    return any(
        needle in form for text in texts if text for form in _forms(text) for needle in needles
    )
