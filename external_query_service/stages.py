"""The four stages of the pipeline, one object each, importable together.

``Planner`` (question + host semantics → plan; its model hook proposes one), ``Gateway``
(plan → gathered evidence from the adapters, within one deadline), ``Verifier`` (gathered →
the verdict and the admitted evidence; pure) and ``Presenter`` (packet → the reader's answer;
its model hook writes one). They share one shape: a stage that does I/O has an async call
(``Planner.plan``, ``Gateway.gather``, ``Presenter.apresent``) and, where the work can be
done without it, a sync one (``Planner.plan_follow_up``, ``Presenter.present``); the
planner and the presenter each take an optional model hook; and each stage's result
(``PlannerResult``, ``VerifierOutcome``, ``Presentation``) carries its own audit record
(``audit_events()``), which the service only assembles.

``toolkit.Verifier`` is another one: the toolkit's protocol for checking a task's result.
This one judges evidence.
"""

from __future__ import annotations

from .gateway._gateway import Gateway
from .planner._structured import Planner
from .presenter._presenter import Presenter
from .verifier._verifier import Verifier

__all__ = ["Gateway", "Planner", "Presenter", "Verifier"]
