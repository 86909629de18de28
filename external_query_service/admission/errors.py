"""The two ways the admission contract says no: ``EvidenceInputError`` (an ``InputError``:
the input itself is unusable, exit 2) and ``ContractRejected`` (well-formed input the
contract refuses, exit 3). Both carry a snake_case ``reason`` and a one-line message fit for
a CLI; the CLI's JSON error output names the reason ``code``, the contract's wire format.
Their place in the library's one exception tree is drawn in ``external_query_service.errors``.
"""

from __future__ import annotations

from ..errors import ExternalQueryError, InputError

__all__ = ["INPUT_ERROR_REASONS", "ContractRejected", "EvidenceInputError"]

#: Every ``EvidenceInputError.reason``; each is a distinct, documented input problem.
INPUT_ERROR_REASONS = frozenset(
    {
        "file_unreadable",  # missing, not a regular file, too large, no permission
        "invalid_json",  # syntax, bad UTF-8, duplicate key, NaN/Infinity, too deep
        "lone_surrogate",  # a string holding half of a UTF-16 surrogate pair
        "float_in_hashed_record",  # floats are never hashed (basis points, decimal strings)
        "integer_out_of_range",  # beyond ±(2**53 - 1), where JSON numbers stop being exact
        "non_object_root",  # the root is not a JSON object
        "bare_providers_array",  # an inventory given as [...] instead of {"providers": [...]}
        "missing_argument",  # a flag the chosen mode needs was not given
        "ledger_unavailable",  # the ledger file cannot be opened or written
        "settings_unreadable",  # --config names a settings file that does not load
    }
)


class EvidenceInputError(InputError):
    """Input the contract cannot even read. ``reason`` is one of ``INPUT_ERROR_REASONS``;
    ``origin`` (a file name, when known) prefixes the message."""

    def __init__(self, reason: str, message: str, *, origin: str | None = None) -> None:
        if reason not in INPUT_ERROR_REASONS:
            raise ValueError(f"unknown input error reason {reason!r}")
        self.reason = reason
        self.origin = origin
        super().__init__(f"{origin}: {message}" if origin else message)


class ContractRejected(ExternalQueryError):
    """Readable input the contract refuses: a tampered plan, a foreign provider, an unknown
    source, a ledger blocker. ``reason`` is snake_case; ``detail`` is one line."""

    def __init__(self, reason: str, detail: str = "") -> None:
        self.reason = reason
        self.detail = detail
        super().__init__(f"{reason}: {detail}" if detail else reason)
