"""The planner stage: question + host semantics -> ``ExternalQueryPlan``.

``structured`` holds the planner every service runs (``Planner``: validates a
proposal, falls back to a conservative plan built from structured fields only); ``model``
holds the optional hook that asks an OpenAI-compatible model for a proposal (``LLMPlanner``).
Names are imported on first access, so a service without a model never loads the client.
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from ._model import LLMPlanner
    from ._structured import (
        Planner,
        PlannerResult,
        StructuredPlanner,
        default_contract,
    )

_EXPORTS = {
    "Planner": "._structured",
    "LLMPlanner": "._model",
    "PlannerResult": "._structured",
    "StructuredPlanner": "._structured",
    "default_contract": "._structured",
}

__all__ = [
    "LLMPlanner",
    "Planner",
    "PlannerResult",
    "StructuredPlanner",
    "default_contract",
]

__getattr__, __dir__ = lazy_exports(
    __name__, _EXPORTS, old_names={"ExternalQueryPlanner": "Planner"}
)
