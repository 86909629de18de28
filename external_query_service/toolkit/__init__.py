"""The evidence toolkit: the chain's evidence objects, driven one step at a time.

``WebTools`` (origin-bounded), ``WorkspaceTools`` (root-bounded), ``EvidenceTask`` (task
file + inputs → records, checks, a saved report with an artifact receipt) and
``ToolkitSession`` (observe / arguments / operate with state references, or ``delegate``:
a configured model runs the task within a budget, to a ``DelegationResult``), all over one
``EvidenceStore``. The MCP server (``external_query_service.mcp_server``) exposes a session.
"""

from .delegate import DelegationResult
from .errors import BoundaryRefused, BudgetExhausted, StaleState, ToolkitError, UnsafePlatform
from .operations import Observation, OperationResult, ToolkitSession
from .origins import OriginSet
from .reports import ArtifactReceipt, CategoryCheck, EvidenceRecord, TaskReport
from .taskfile import DelegationRules, TaskInputs, TaskSpec, load_inputs, load_task
from .tasks import CollectionSummary, EvidenceTask
from .web import WebBudget, WebPage, WebTools
from .workspace import WorkspaceLimits, WorkspaceTools

__all__ = [
    "ArtifactReceipt",
    "BoundaryRefused",
    "BudgetExhausted",
    "CategoryCheck",
    "CollectionSummary",
    "DelegationResult",
    "DelegationRules",
    "EvidenceRecord",
    "EvidenceTask",
    "Observation",
    "OperationResult",
    "OriginSet",
    "StaleState",
    "TaskInputs",
    "TaskReport",
    "TaskSpec",
    "ToolkitError",
    "ToolkitSession",
    "UnsafePlatform",
    "WebBudget",
    "WebPage",
    "WebTools",
    "WorkspaceLimits",
    "WorkspaceTools",
    "load_inputs",
    "load_task",
]
