"""Does a text repeat a credential? The one check for what comes back from outside.

A provider that echoes its API key (in a result URL, a title, a reply) must not get the
key into the answer, the evidence, the cache, the audit or the logs. The check looks at a
text as sent, as a reader would see it (invisible characters dropped, since they could
split the key; NFKC-folded, since full-width letters read as the key too) and, for URLs,
percent-decoded. It returns a bool, so no raised exception's frame holds the key.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from urllib.parse import unquote

from ._visible import strip_invisible

__all__ = ["SECRET_IN_RESULT", "repeats_credential"]

#: The audit reason for a search hit or page dropped because it carries a credential.
SECRET_IN_RESULT = "secret_in_result"


def _forms(text: str) -> Iterable[str]:
    visible = strip_invisible(text)
    folded = unicodedata.normalize("NFKC", visible)
    return dict.fromkeys((text, visible, folded, unquote(folded)))


def repeats_credential(texts: Iterable[str], credentials: Iterable[str]) -> bool:
    """Does any of ``texts`` contain one of ``credentials`` (empty ones never match)?"""
    keys = tuple(key for key in credentials if key)
    return bool(keys) and any(
        key in form for text in texts for form in _forms(text) for key in keys
    )
