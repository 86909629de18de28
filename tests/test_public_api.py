"""The public surface is exported on purpose; changing it is a decision, not an accident."""

from __future__ import annotations

import external_query_service as eqs

EXPECTED = [
    "Adapter",
    "AdapterAttempt",
    "AdapterCapability",
    "AdapterError",
    "AdapterOutcome",
    "AdapterRuntime",
    "AdmissionSummary",
    "AuditEvent",
    "AuditTrace",
    "BlockedDestination",
    "Clock",
    "ContentTooLarge",
    "DisplaySource",
    "Evidence",
    "EvidenceStore",
    "ExternalAnswer",
    "ExternalContextPacket",
    "ExternalQueryError",
    "ExternalQueryPlan",
    "ExternalQueryService",
    "ExtractionFailed",
    "FetchDeadlineExceeded",
    "FetchError",
    "InputError",
    "QuerySemantics",
    "ServiceClosed",
    "Session",
    "Settings",
    "SettingsError",
    "TimeRange",
    "TooManyRedirects",
    "UnknownAdapterKind",
    "UnsafeURL",
    "UnsupportedContent",
    "UpstreamStatus",
    "VerifierResult",
    "__version__",
    "fixed_clock",
    "register_adapter",
    "system_clock",
]


def test_all_is_sorted_and_pinned() -> None:
    assert eqs.__all__ == sorted(eqs.__all__)
    assert eqs.__all__ == EXPECTED


def test_every_exported_name_exists() -> None:
    missing = [name for name in eqs.__all__ if not hasattr(eqs, name)]
    assert missing == []


def test_errors_share_one_root() -> None:
    for name in eqs.__all__:
        value = getattr(eqs, name)
        if isinstance(value, type) and issubclass(value, Exception):
            assert issubclass(value, eqs.ExternalQueryError), name


def test_package_ships_type_information() -> None:
    from importlib.resources import files

    assert files("external_query_service").joinpath("py.typed").is_file()
