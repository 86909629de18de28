"""The contract's content addressing, under the names the contract has always used: the
package's one canonical-JSON helper (``.._canonical``) re-exported, not a copy."""

from __future__ import annotations

from .._canonical import (
    DIGEST_PATTERN,
    HASH_CONTRACT,
    MAX_DEPTH,
    MAX_SAFE_INTEGER,
    canonical_json,
    check_hashable,
    content_id,
    is_digest,
    loads_record,
    loads_value,
)

__all__ = [
    "DIGEST_PATTERN",
    "HASH_CONTRACT",
    "MAX_DEPTH",
    "MAX_SAFE_INTEGER",
    "canonical_json",
    "check_hashable",
    "content_id",
    "is_digest",
    "loads_record",
    "loads_value",
]
