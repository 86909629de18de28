"""external_query_service: answer questions only from external evidence.

from external_query_service import ExternalQueryService, Settings

with ExternalQueryService(Settings.load("external-query.toml")) as service:
    answer = service.answer("湛江明天天气怎么样？", {"query_kind": "weather", "location": "湛江"})
    print(answer.status, answer.text)
"""

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
