"""How many independent sources a plan needs: one rule, read by the gateway (when to stop
trying adapters) and by the verifier (whether the bundle is enough).

- A ``compare_with_sources`` plan with compare targets needs
  ``min_sources_per_compare_target`` distinct sites for each target.
- Any other plan needs distinct sites over the whole bundle, by its contract:
  ``min_sources_direct_fact``, ``min_sources_summary``, and for a comparison without
  targets ``min_sources_per_compare_target`` (the whole bundle held to the per-target bar).

Compare targets on a plan of another contract (a ``direct_fact`` about one of two named
things) do not change what it needs: the verifier's verdict holds the answer to its
contract, so the gateway asking for more would spend tries past the point the answer can be
given, and asking for less would stop before the verdict can pass.

Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..models import ExternalQueryPlan
from ..settings import VerifierSettings

__all__ = ["SourcesNeeded", "sources_needed"]


@dataclass(frozen=True, slots=True)
class SourcesNeeded:
    """``sites`` distinct sites for each of ``targets``, or for the whole bundle when
    ``targets`` is empty."""

    sites: int
    targets: tuple[str, ...] = ()


def sources_needed(plan: ExternalQueryPlan, limits: VerifierSettings) -> SourcesNeeded:
    """What ``plan`` needs under ``limits`` (the rule in the module docstring)."""
    if plan.answer_contract == "compare_with_sources" and plan.compare_targets:
        return SourcesNeeded(limits.min_sources_per_compare_target, plan.compare_targets)
    sites = {
        "direct_fact": limits.min_sources_direct_fact,
        "summary_with_sources": limits.min_sources_summary,
        "compare_with_sources": limits.min_sources_per_compare_target,
    }[plan.answer_contract]
    return SourcesNeeded(sites)
