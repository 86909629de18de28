"""The evidence verifier: per-source checks and the bundle verdict. Pure: no I/O, no clock."""

from __future__ import annotations

from .sites import (
    check_origin,
    domain_matches,
    ip_literal,
    normalize_host,
    registrable_domain,
    source_allowed,
    url_host,
)
from .targets import (
    MATCH_THRESHOLD,
    best_match,
    matches_target,
    mentions_target,
    normalize_for_match,
)
from .timecheck import TimeVerdict, check_time, local_date
from .verifier import EvidenceVerifier, VerifierOutcome

__all__ = [
    "MATCH_THRESHOLD",
    "EvidenceVerifier",
    "TimeVerdict",
    "VerifierOutcome",
    "best_match",
    "check_origin",
    "check_time",
    "domain_matches",
    "ip_literal",
    "local_date",
    "matches_target",
    "mentions_target",
    "normalize_for_match",
    "normalize_host",
    "registrable_domain",
    "source_allowed",
    "url_host",
]
