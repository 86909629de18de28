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
    from .admission.errors import ContractRejected, EvidenceInputError
    from .audit import AuditEvent, AuditTrace
    from .clock import Clock, fixed_clock, system_clock
    from .errors import (
        AdapterError,
        BlockedDestination,
        BrowserUnavailable,
        ContentTooLarge,
        ExternalQueryError,
        ExtractionFailed,
        FetchDeadlineExceeded,
        FetchError,
        InputError,
        InvalidQuery,
        NotRecorded,
        RenderFailed,
        ServiceClosed,
        SettingsError,
        TaskDefinitionError,
        TooManyRedirects,
        UnknownAdapterKind,
        UnsafeURL,
        UnsupportedContent,
        UpstreamStatus,
    )
    from .gateway.registry import register_adapter
    from .integrations.common import IntegrationUnavailable
    from .llm.client import LLMError
    from .llm.presenter import AnswerRejected
    from .mcp_server import McpUnavailable
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
    from .server import ServerUnavailable
    from .server.errors import ApiError
    from .service import ExternalQueryService, Session
    from .settings import Settings
    from .storage.models import LedgerError, UnsoundLedger
    from .store import EvidenceEvicted, EvidenceStore
    from .testing.plugin import CaseFailed
    from .testing.recorder import NothingAnswered
    from .toolkit.errors import (
        BoundaryRefused,
        BudgetExhausted,
        StaleState,
        ToolkitError,
        UnsafePlatform,
    )

# Each public name and the module that defines it, imported on first access: importing the
# package alone loads nothing heavy.
_EXPORTS = {
    "Adapter": ".adapters.base",
    "AdapterAttempt": ".models",
    "AdapterCapability": ".models",
    "AdapterError": ".errors",
    "AdapterOutcome": ".adapters.base",
    "AdapterRuntime": ".adapters.base",
    "ApiError": ".server.errors",
    "AdmissionSummary": ".models",
    "AnswerRejected": ".llm.presenter",
    "AuditEvent": ".audit",
    "AuditTrace": ".audit",
    "BlockedDestination": ".errors",
    "BrowserUnavailable": ".errors",
    "BoundaryRefused": ".toolkit.errors",
    "BudgetExhausted": ".toolkit.errors",
    "CaseFailed": ".testing.plugin",
    "Clock": ".clock",
    "ContentTooLarge": ".errors",
    "ContractRejected": ".admission.errors",
    "DisplaySource": ".models",
    "Evidence": ".models",
    "EvidenceInputError": ".admission.errors",
    "EvidenceEvicted": ".store",
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
    "IntegrationUnavailable": ".integrations.common",
    "InvalidQuery": ".errors",
    "LLMError": ".llm.client",
    "LedgerError": ".storage.models",
    "McpUnavailable": ".mcp_server",
    "NotRecorded": ".errors",
    "NothingAnswered": ".testing.recorder",
    "QuerySemantics": ".models",
    "RenderFailed": ".errors",
    "ServerUnavailable": ".server",
    "ServiceClosed": ".errors",
    "Session": ".service",
    "Settings": ".settings",
    "SettingsError": ".errors",
    "TaskDefinitionError": ".errors",
    "StaleState": ".toolkit.errors",
    "TimeRange": ".models",
    "TooManyRedirects": ".errors",
    "ToolkitError": ".toolkit.errors",
    "UnknownAdapterKind": ".errors",
    "UnsoundLedger": ".storage.models",
    "UnsafePlatform": ".toolkit.errors",
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
    "AnswerRejected",
    "ApiError",
    "AuditEvent",
    "AuditTrace",
    "BlockedDestination",
    "BoundaryRefused",
    "BrowserUnavailable",
    "BudgetExhausted",
    "CaseFailed",
    "Clock",
    "ContentTooLarge",
    "ContractRejected",
    "DisplaySource",
    "Evidence",
    "EvidenceEvicted",
    "EvidenceInputError",
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
    "IntegrationUnavailable",
    "InvalidQuery",
    "LLMError",
    "LedgerError",
    "McpUnavailable",
    "NotRecorded",
    "NothingAnswered",
    "QuerySemantics",
    "RenderFailed",
    "ServerUnavailable",
    "ServiceClosed",
    "Session",
    "Settings",
    "SettingsError",
    "StaleState",
    "TaskDefinitionError",
    "TimeRange",
    "TooManyRedirects",
    "ToolkitError",
    "UnknownAdapterKind",
    "UnsafePlatform",
    "UnsafeURL",
    "UnsoundLedger",
    "UnsupportedContent",
    "UpstreamStatus",
    "VerifierResult",
    "__version__",
    "fixed_clock",
    "register_adapter",
    "system_clock",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
