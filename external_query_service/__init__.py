"""external_query_service: answer questions only from external evidence.

from external_query_service import ExternalQueryService, Settings

with ExternalQueryService(Settings.load("external-query.toml")) as service:
    answer = service.answer("湛江明天天气怎么样？", {"query_kind": "weather", "location": "湛江"})
    print(answer.status, answer.text)
"""

from typing import TYPE_CHECKING

from ._lazy import lazy_exports

if TYPE_CHECKING:
    from ._version import __version__
    from .adapters.base import Adapter, AdapterOutcome, AdapterRuntime
    from .audit import AuditEvent, AuditTrace
    from .clock import Clock, fixed_clock, system_clock
    from .errors import (
        AdapterError,
        BlockedDestination,
        ContentTooLarge,
        ExternalQueryError,
        ExtractionFailed,
        FetchDeadlineExceeded,
        FetchError,
        InputError,
        InvalidQuery,
        ServiceClosed,
        SettingsError,
        TooManyRedirects,
        UnknownAdapterKind,
        UnsafeURL,
        UnsupportedContent,
        UpstreamStatus,
    )
    from .gateway.registry import register_adapter
    from .models import (
        AdapterAttempt,
        AdapterCapability,
        AdmissionSummary,
        DisplaySource,
        Evidence,
        ExternalAnswer,
        ExternalContextPacket,
        ExternalQueryPlan,
        QuerySemantics,
        TimeRange,
        VerifierResult,
    )
    from .service import ExternalQueryService, Session
    from .settings import Settings
    from .store import EvidenceStore

# Each public name and the module that defines it, imported on first access: importing the
# package alone loads nothing heavy.
_EXPORTS = {
    "Adapter": ".adapters.base",
    "AdapterAttempt": ".models",
    "AdapterCapability": ".models",
    "AdapterError": ".errors",
    "AdapterOutcome": ".adapters.base",
    "AdapterRuntime": ".adapters.base",
    "AdmissionSummary": ".models",
    "AuditEvent": ".audit",
    "AuditTrace": ".audit",
    "BlockedDestination": ".errors",
    "Clock": ".clock",
    "ContentTooLarge": ".errors",
    "DisplaySource": ".models",
    "Evidence": ".models",
    "EvidenceStore": ".store",
    "ExternalAnswer": ".models",
    "ExternalContextPacket": ".models",
    "ExternalQueryError": ".errors",
    "ExternalQueryPlan": ".models",
    "ExternalQueryService": ".service",
    "ExtractionFailed": ".errors",
    "FetchDeadlineExceeded": ".errors",
    "FetchError": ".errors",
    "InputError": ".errors",
    "InvalidQuery": ".errors",
    "QuerySemantics": ".models",
    "ServiceClosed": ".errors",
    "Session": ".service",
    "Settings": ".settings",
    "SettingsError": ".errors",
    "TimeRange": ".models",
    "TooManyRedirects": ".errors",
    "UnknownAdapterKind": ".errors",
    "UnsafeURL": ".errors",
    "UnsupportedContent": ".errors",
    "UpstreamStatus": ".errors",
    "VerifierResult": ".models",
    "fixed_clock": ".clock",
    "register_adapter": ".gateway.registry",
    "system_clock": ".clock",
    "__version__": "._version",
}

__all__ = [
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
    "InvalidQuery",
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

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
