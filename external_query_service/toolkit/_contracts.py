"""The toolkit's wire models: everything that crosses to a caller, an MCP host or a model.

A session's observation, the tool contracts and candidate domains it offers, operation
results; the reply a delegated model sends each turn and the delegation's terminal result.
They sit apart from the session (``operations.py``) and the delegation loop
(``delegate.py``) so both depend on them and neither on the other's module. A tool's own
result (a page, a file listing, a window of a capture) is defined beside the tool that
makes it; the saved report and its receipt in ``reports.py``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, JsonValue, model_validator

from .._frozen import Frozen
from ._confidence import Selection
from ._reports import ArtifactReceipt, CategoryCheck

__all__ = [
    "MAX_OPTIONS",
    "OBSERVED_CAPTURES",
    "ArgumentDomain",
    "ArgumentOption",
    "ArgumentsResult",
    "CaptureSummary",
    "DelegatedStep",
    "DelegationBudget",
    "DelegationCost",
    "DelegationResult",
    "DelegationStatus",
    "DelegationView",
    "Effect",
    "LastOperation",
    "Observation",
    "OperationResult",
    "ParameterContract",
    "Route",
    "StepReply",
    "TaskView",
    "ToolContract",
    "ToolFailure",
]

#: Captures listed in an observation (older ones stay readable by reference).
OBSERVED_CAPTURES = 8
#: Candidates per ``arguments`` answer; ``start`` pages through the rest.
MAX_OPTIONS = 50

#: What running a tool does: looks (observe), adds captures, records a quote, saves.
Effect = Literal["observe", "capture", "record", "save"]


class ParameterContract(Frozen):
    """A tool parameter; ``depends_on`` names the parameter whose choice lists its values."""

    name: str
    description: str
    depends_on: str | None = None
    #: How sure a delegated model must be of its option: ``match`` where one option is
    #: right (recording a quote), ``explore`` where several are reasonable (where to look).
    selection: Selection = "match"


class ToolContract(Frozen):
    """A tool: its name, what it does, its effect and its parameters."""

    name: str
    description: str
    effect: Effect
    parameters: tuple[ParameterContract, ...] = ()


class ArgumentOption(Frozen):
    """One value a parameter may take: the id to pass, and a label for a reader."""

    id: str
    label: str


class ArgumentDomain(Frozen):
    """Candidates for one parameter (under ``parent`` for a dependent one)."""

    parameter: str
    parent: dict[str, str]
    options: tuple[ArgumentOption, ...]
    start: int
    total: int


class ArgumentsResult(Frozen):
    """The values each parameter of ``tool`` may take now, for ``state_ref``."""

    tool: str
    state_ref: str
    domains: tuple[ArgumentDomain, ...]
    #: Dependent parameters not listed because their parent was not chosen yet.
    waiting_for_parent: tuple[str, ...]


class ToolFailure(Frozen):
    """Why an operation failed: a snake_case reason and one line of detail."""

    reason: str
    detail: str


class OperationResult(Frozen):
    """``ok`` with ``result``, or not ok with ``error``; ``state_ref`` is the new state's."""

    tool: str
    ok: bool
    result: JsonValue = None
    error: ToolFailure | None = None
    state_ref: str


class CaptureSummary(Frozen):
    """A capture as an observation lists it (no text)."""

    ref: str
    source: str
    length: int
    digest: str
    summary: str


class TaskView(Frozen):
    """The task a session works on, as an observation shows it."""

    name: str
    description: str
    source: str
    categories: dict[str, str]
    required: tuple[str, ...]
    output: str
    entry_url: str | None
    allowed_origins: tuple[str, ...]
    queries: tuple[str, ...]


class LastOperation(Frozen):
    """The previous operation's tool, whether it worked, and why not."""

    tool: str
    ok: bool
    reason: str | None = None


Route = Literal["direct", "delegated"]


class DelegationView(Frozen):
    """Whether ``delegate`` can run now (``reason`` says why not), the route this session
    took, and the goal and status of its delegation once started."""

    ready: bool
    reason: str | None
    route: Route | None
    goal: str | None = None
    status: str | None = None


class Observation(Frozen):
    """The session's state: its ``state_ref``, the task, the tools, captures, records,
    checks, budget usage, the last operation and read, the artifact receipt once saved,
    and each installed toolkit's own compact projection (``toolkits``, by name)."""

    state_ref: str
    step: int
    task: TaskView | None
    tools: tuple[ToolContract, ...]
    captures: tuple[CaptureSummary, ...]
    capture_count: int
    records: dict[str, int]
    checks: tuple[CategoryCheck, ...]
    usage: dict[str, int]
    last_operation: LastOperation | None
    #: The text of the last read (read_evidence, web.read_section), at most 1,200 characters.
    last_read: str | None
    receipt: ArtifactReceipt | None
    delegation: DelegationView
    toolkits: dict[str, JsonValue] = {}  # noqa: RUF012 - a pydantic field; each model copies it


# --- delegation: the model's reply and the run's result ------------------------------------

DelegationStatus = Literal[
    "completed",
    "incomplete",
    "budget_exhausted",
    "uncertain_choice",
    "refused_too_often",
    "model_failed",
]


class StepReply(Frozen):
    """What the model replies each turn (its schema is set per turn): ``step`` holds
    ``tool`` (None: stop) and one option id per parameter, by parameter name."""

    note: str
    state_ref: str
    step: dict[str, str | None]

    @property
    def tool(self) -> str | None:
        """The tool the step names (None: the model stops)."""
        return self.step.get("tool")

    @property
    def done(self) -> bool:
        """The model stops the run."""
        return self.step.get("tool") is None


class DelegationBudget(Frozen):
    """What one delegated run may spend: steps, seconds and model tokens."""

    max_steps: int = Field(ge=1, le=500)
    timeout_s: float = Field(gt=0, le=86_400)
    max_tokens: int = Field(ge=1)


class DelegationCost(Frozen):
    """What the run used: operations, model calls and tokens (as the endpoint reported
    them; ``replies_without_usage`` counts replies that reported none), time."""

    steps: int
    model_calls: int
    prompt_tokens: int
    completion_tokens: int
    tokens: int
    replies_without_usage: int
    refusals: int
    seconds: float


class DelegatedStep(Frozen):
    """One operation the run executed: the option ids (and what they stood for), its
    outcome, who chose it (the model, or the loop's closing save) and its gate."""

    step: int
    tool: str
    arguments: dict[str, str]
    labels: dict[str, str]
    ok: bool
    reason: str | None = None
    chosen_by: Literal["model", "loop"]
    gated: bool


class DelegationResult(Frozen):
    """The terminal state of a delegated run."""

    status: DelegationStatus
    goal: str
    #: One line: what stopped the run (and, when not completed, the failing checks).
    stopped_because: str
    steps: tuple[DelegatedStep, ...]
    checks: tuple[CategoryCheck, ...]
    failing_checks: tuple[str, ...]
    #: This run saved the report (``receipt.matches`` says whether it still matches).
    report_saved: bool
    report_path: str
    #: The saved report's receipt, under the name the toolkit's design gives it.
    artifact: ArtifactReceipt
    #: The same receipt, under its first name (kept for callers that read it).
    receipt: ArtifactReceipt
    budget: DelegationBudget
    cost: DelegationCost
    model: str

    @model_validator(mode="before")
    @classmethod
    def _one_receipt(cls, data: Any) -> Any:
        """``artifact`` and ``receipt`` are one receipt: given either, both hold it."""
        if isinstance(data, dict):
            given = data.get("artifact", data.get("receipt"))
            if given is not None:
                data = {**data, "artifact": given, "receipt": data.get("receipt", given)}
        return data
