"""The evidence verifier: per-source checks and the bundle verdict. Pure: no I/O, no clock."""

from __future__ import annotations

from .._lazy import renamed
from ._timecheck import TimeVerdict, check_time, local_date
from ._verifier import Verifier, VerifierOutcome

__all__ = ["TimeVerdict", "Verifier", "VerifierOutcome", "check_time", "local_date"]

#: The old name of ``Verifier``, kept for one release (a ``DeprecationWarning`` on use).
__getattr__ = renamed(__name__, {"EvidenceVerifier": "Verifier"})
