"""Content digests, spelled the one way every record uses: ``sha256:<64 lowercase hex>``."""

from __future__ import annotations

import hashlib

__all__ = ["sha256_digest"]


def sha256_digest(data: bytes | str) -> str:
    """``sha256:<hex>`` of ``data``; text is hashed as its UTF-8 bytes."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    return "sha256:" + hashlib.sha256(data).hexdigest()
