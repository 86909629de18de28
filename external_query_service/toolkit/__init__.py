"""The evidence toolkit: the chain's evidence objects, driven one step at a time.

``WebTools`` (origin-bounded), ``WorkspaceTools`` (root-bounded), ``EvidenceTask`` (task
file or script + inputs → records, checks, a saved report with an artifact receipt),
``TaskScript(build)`` (a Python task module's ``workflow``: ``build(inputs)`` assembles the
task from validated runtime inputs, once, when first needed) and ``ToolkitSession``
(observe / arguments / operate with state references, or ``delegate``: a configured model
runs the task within a budget, to a ``DelegationResult``), all over one ``EvidenceStore``.

Tools come from toolkits (``Toolkit``: ``name``, ``observe()``, ``install(task)``):
``WebToolkit`` and ``WorkspaceToolkit`` built in, and any a caller adds, each tool a
``Tool`` with ``Parameter``s (``selection="match"`` or ``"explore"``) and candidates (or a
``ToolDefinition`` declared once and bound to its source, as the built-in tools are); a
``TrustedGenerator`` feeds a candidate pool with checked text. The MCP server
(``external_query_service.server.mcp``) exposes a session.
"""

from .._evidence_store import EvidenceStore
from ..errors import BoundaryRefused, BudgetExhausted, StaleState, ToolkitError, UnsafePlatform
from ._delegate import DelegationResult
from ._kits import WebToolkit, WorkspaceToolkit
from ._operations import Observation, OperationResult, ToolkitSession
from ._origins import OriginSet
from ._reports import ArtifactReceipt, CategoryCheck, EvidenceRecord, TaskReport
from ._script import RuntimeInputs, TaskScript, load_script
from ._taskfile import DelegationRules, TaskBudget, TaskInputs, TaskSpec, load_inputs, load_task
from ._tasks import CollectionSummary, EvidenceTask, MarkerVerifier, Verifier
from ._tools import (
    CandidateValue,
    GeneratorContext,
    Parameter,
    Tool,
    ToolDefinition,
    Toolkit,
    TrustedGenerator,
)
from ._web import WebBudget, WebPage, WebTools
from ._workspace import WorkspaceLimits, WorkspaceTools

__all__ = [
    "ArtifactReceipt",
    "BoundaryRefused",
    "BudgetExhausted",
    "CandidateValue",
    "CategoryCheck",
    "CollectionSummary",
    "DelegationResult",
    "DelegationRules",
    "EvidenceRecord",
    "EvidenceStore",
    "EvidenceTask",
    "GeneratorContext",
    "MarkerVerifier",
    "Observation",
    "OperationResult",
    "OriginSet",
    "Parameter",
    "RuntimeInputs",
    "StaleState",
    "TaskBudget",
    "TaskInputs",
    "TaskReport",
    "TaskScript",
    "TaskSpec",
    "Tool",
    "ToolDefinition",
    "Toolkit",
    "ToolkitError",
    "ToolkitSession",
    "TrustedGenerator",
    "UnsafePlatform",
    "Verifier",
    "WebBudget",
    "WebPage",
    "WebToolkit",
    "WebTools",
    "WorkspaceLimits",
    "WorkspaceToolkit",
    "WorkspaceTools",
    "load_inputs",
    "load_script",
    "load_task",
]
