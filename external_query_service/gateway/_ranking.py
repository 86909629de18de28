"""Adapter ranking: a pure function of plan + declared capabilities + readiness.

Never registration order, never adapter names or classes. The rules:

- a ready ``fact_api`` that declares the plan's kind goes first (structured facts); one
  that declares no kinds at all makes no such claim and follows live search;
- ``live_search`` serves every web question, after a fact API;
- ``doc_search`` serves documentation questions only (first for them) and never takes a
  web question; for documentation, fact APIs and live search follow;
- ties break on freshness support (when the plan needs it), then page fetch, then id.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..models import AdapterCapability, ExternalQueryPlan, RankedAdapter, Readiness

__all__ = [
    "DOCUMENTATION",
    "rank_adapters",
]

DOCUMENTATION = "documentation"


def _tier(plan: ExternalQueryPlan, cap: AdapterCapability) -> tuple[int | None, str]:
    """The adapter's tier for this plan (lower first), or None with why it is left out."""
    kind = plan.query_kind
    documentation = kind == DOCUMENTATION
    if cap.provider_type == "doc_search":
        declared = kind in cap.supported_query_kinds or (
            documentation and not cap.supported_query_kinds
        )
        if not declared:
            return None, "doc_search serves documentation questions only"
        return 0, f"doc_search declares {kind}"
    if not cap.supports(kind):
        return None, f"{cap.provider_type} does not declare {kind}"
    if cap.provider_type == "fact_api":
        if not cap.supported_query_kinds:
            # Serving "every kind" is no claim to structured facts for this one.
            return 2, "fact_api declares no query kinds: after live search"
        if documentation:
            return 1, "fact_api declares documentation; local documentation first"
        return 0, f"fact_api declares {kind}: structured facts first"
    if documentation:
        return 2, "live_search after documentation sources"
    return 1, "live_search serves web questions"


def rank_adapters(
    plan: ExternalQueryPlan,
    capabilities: Sequence[AdapterCapability],
    readiness: Mapping[str, Readiness],
) -> tuple[RankedAdapter, ...]:
    """Ranked adapters first (rank 1, 2, ...), then the ones left out (rank None)."""
    eligible: list[tuple[tuple[int, int, int, str], AdapterCapability, str]] = []
    excluded: list[RankedAdapter] = []
    for cap in capabilities:
        ready = readiness.get(cap.adapter_id, Readiness(ready=False, reason="not probed"))
        if not ready.ready:
            excluded.append(
                RankedAdapter(
                    adapter_id=cap.adapter_id,
                    provider_type=cap.provider_type,
                    rank=None,
                    reason=f"not ready: {ready.reason or 'unknown'}",
                    excluded="not_ready",
                    readiness_reason=ready.reason or "unknown",
                )
            )
            continue
        tier, why = _tier(plan, cap)
        if tier is None:
            excluded.append(
                RankedAdapter(
                    adapter_id=cap.adapter_id,
                    provider_type=cap.provider_type,
                    rank=None,
                    reason=why,
                    excluded="kind_not_served",
                )
            )
            continue
        fresh = 0 if (plan.freshness_required and cap.supports_freshness) else 1
        fetch = 0 if cap.supports_page_fetch else 1
        eligible.append(((tier, fresh, fetch, cap.adapter_id), cap, why))

    eligible.sort(key=lambda item: item[0])
    ranked = []
    for position, (key, cap, why) in enumerate(eligible, start=1):
        notes = [why]
        if plan.freshness_required:
            notes.append("supports freshness" if key[1] == 0 else "no freshness support")
        notes.append("fetches page bodies" if key[2] == 0 else "no page fetch")
        ranked.append(
            RankedAdapter(
                adapter_id=cap.adapter_id,
                provider_type=cap.provider_type,
                rank=position,
                reason="; ".join(notes),
            )
        )
    excluded.sort(key=lambda item: item.adapter_id)
    return (*ranked, *excluded)
