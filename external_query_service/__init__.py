"""external_query_service: answer questions only from external evidence.

from external_query_service import ExternalQueryService, Settings

with ExternalQueryService(Settings.load("external-query.toml")) as service:
    answer = service.answer("湛江明天天气怎么样？", {"query_kind": "weather", "location": "湛江"})
    print(answer.status, answer.text)

The folders, by what they are to a question:

- the pipeline, one folder per stage, run in order by ``service.py``: ``planner/``,
  ``gateway/`` (with ``adapters/``, its sources), ``verifier/``, ``presenter/``;
- infrastructure that serves the stages: ``net/``, ``text/``, ``execution/``,
  ``observability/``, ``llm/``, ``storage/``, ``browser/``;
- the second product, evidence admission and the toolkit: ``admission/``, ``methods/``,
  ``toolkit/``;
- the ways in, front ends and what hosts use: ``server/``, ``cli/``, ``testing/``,
  ``integrations/``, ``bundle/``.
"""

from typing import TYPE_CHECKING

from ._lazy import declared_exports, lazy_exports

if TYPE_CHECKING:
    from ._audit import AuditEvent as AuditEvent
    from ._audit import AuditTrace as AuditTrace
    from ._clock import Clock as Clock
    from ._clock import fixed_clock as fixed_clock
    from ._clock import system_clock as system_clock
    from ._evidence_store import EvidenceStore as EvidenceStore
    from ._version import __version__ as __version__
    from .adapters._base import Adapter as Adapter
    from .adapters._base import AdapterOutcome as AdapterOutcome
    from .adapters._base import AdapterRuntime as AdapterRuntime
    from .bundle import verify_bundle as verify_bundle
    from .errors import AdapterError as AdapterError
    from .errors import AnswerRejected as AnswerRejected
    from .errors import ApiError as ApiError
    from .errors import BlockedDestination as BlockedDestination
    from .errors import BoundaryRefused as BoundaryRefused
    from .errors import BrowserUnavailable as BrowserUnavailable
    from .errors import BudgetExhausted as BudgetExhausted
    from .errors import CaseFailed as CaseFailed
    from .errors import ContentTooLarge as ContentTooLarge
    from .errors import ContractRejected as ContractRejected
    from .errors import EvidenceEvicted as EvidenceEvicted
    from .errors import EvidenceInputError as EvidenceInputError
    from .errors import ExternalQueryError as ExternalQueryError
    from .errors import ExtractionFailed as ExtractionFailed
    from .errors import FetchDeadlineExceeded as FetchDeadlineExceeded
    from .errors import FetchError as FetchError
    from .errors import InputError as InputError
    from .errors import IntegrationUnavailable as IntegrationUnavailable
    from .errors import InvalidQuery as InvalidQuery
    from .errors import LedgerError as LedgerError
    from .errors import LLMError as LLMError
    from .errors import McpUnavailable as McpUnavailable
    from .errors import NothingAnswered as NothingAnswered
    from .errors import NotRecorded as NotRecorded
    from .errors import RenderFailed as RenderFailed
    from .errors import SemanticUnavailable as SemanticUnavailable
    from .errors import ServerUnavailable as ServerUnavailable
    from .errors import ServiceClosed as ServiceClosed
    from .errors import SettingsError as SettingsError
    from .errors import StaleState as StaleState
    from .errors import TaskDefinitionError as TaskDefinitionError
    from .errors import ToolkitError as ToolkitError
    from .errors import TooManyRedirects as TooManyRedirects
    from .errors import UnknownAdapterKind as UnknownAdapterKind
    from .errors import UnsafePlatform as UnsafePlatform
    from .errors import UnsafeURL as UnsafeURL
    from .errors import UnsoundLedger as UnsoundLedger
    from .errors import UnsupportedContent as UnsupportedContent
    from .errors import UpstreamStatus as UpstreamStatus
    from .execution._collector import tune_collector as tune_collector
    from .gateway._registry import register_adapter as register_adapter
    from .models import AdapterAttempt as AdapterAttempt
    from .models import AdapterCapability as AdapterCapability
    from .models import AdmissionSummary as AdmissionSummary
    from .models import DisplaySource as DisplaySource
    from .models import Evidence as Evidence
    from .models import ExternalAnswer as ExternalAnswer
    from .models import ExternalContextPacket as ExternalContextPacket
    from .models import ExternalQueryPlan as ExternalQueryPlan
    from .models import QuerySemantics as QuerySemantics
    from .models import TimeRange as TimeRange
    from .models import VerifierResult as VerifierResult
    from .service import ExternalQueryService as ExternalQueryService
    from .service import Session as Session
    from .settings import Settings as Settings


# The imports above are the public API, each name written once: a type checker reads them
# (``Name as Name`` marks a deliberate re-export), and at run time the same lines say where
# each name lives, imported on first access, so importing the package alone loads nothing
# heavy.
_EXPORTS = declared_exports(__name__)
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
