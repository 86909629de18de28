"""Answer bundles checked again: ``verify_bundle`` offline or against the cited pages.

See README.md beside this file for the rule and what each module holds; the bundle itself
(schema, ids, signature) is ``_bundle.py`` at the top level, which the answer model builds.
"""

from __future__ import annotations

from ._verify import (
    VERDICTS,
    BundleVerdict,
    BundleVerification,
    LedgerState,
    SourceVerification,
    averify_bundle,
    verify_bundle,
)

__all__ = [
    "VERDICTS",
    "BundleVerdict",
    "BundleVerification",
    "LedgerState",
    "SourceVerification",
    "averify_bundle",
    "verify_bundle",
]
