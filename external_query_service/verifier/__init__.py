"""The evidence verifier: per-source checks and the bundle verdict. Pure: no I/O, no clock."""

from __future__ import annotations

from ._timecheck import TimeVerdict, check_time, local_date
from ._verifier import EvidenceVerifier, VerifierOutcome

__all__ = ["EvidenceVerifier", "TimeVerdict", "VerifierOutcome", "check_time", "local_date"]
