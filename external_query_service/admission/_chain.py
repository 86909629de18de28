"""The answer chain as admission records: one plan and receipt per adapter attempt, the
verifier's per-source decisions as admissions, the presented answer as the readback.

Mapping (one plan per attempt, receipts from the chain): objective = the question, user
activity = ``answer_external_question``, decision = the answer contract, evidence kinds =
``[query_kind]``, envelope = network policy, budgets and adapter settings plus the plan's
search fields (no clock values). Attempt ``ok`` → ``succeeded``, ``empty`` →
``no_evidence``, ``failed``/``timeout`` → ``failed``, ``skipped`` → no plan. Pure: the
caller passes every time in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final, Literal

from pydantic import JsonValue

from .._frozen import Frozen
from ..models import (
    AdapterAttempt,
    AdmissionSummary,
    Evidence,
    ExternalQueryPlan,
    GatherResult,
    RankedAdapter,
    VerifierResult,
)
from ..settings import CacheSettings, Settings
from ._admit import decide_built
from ._models import (
    PROTOCOL,
    Admission,
    EvidencePlan,
    EvidenceReceipt,
    EvidenceRequest,
    ProviderRow,
    Retirement,
    SourceDecision,
    parse_model,
)
from ._plan import build_plan, build_request
from ._projection import compact
from ._receipt import receipt_digest
from ._retire import retire_built

__all__ = [
    "SCHEMA_CHAIN",
    "USER_ACTIVITY",
    "ChainLink",
    "ChainRecord",
    "ChainRetirement",
    "bind_answer",
    "service_envelope",
]

USER_ACTIVITY = "answer_external_question"
SCHEMA_CHAIN: Final = "external_evidence_chain_v0"

_RECEIPT_STATUS: dict[str, Literal["succeeded", "no_evidence", "failed"]] = {
    "ok": "succeeded",
    "empty": "no_evidence",
    "failed": "failed",
    "timeout": "failed",
}
_LIMITATION = {
    "page_body": "Main text extracted from one page at access time; linked pages, images "
    "and other pages of the site were not inspected.",
    "search_snippet": "Search result snippet only; the page body could not be read.",
    "fact_api": "Values as the provider reported them; not checked against another source.",
    "doc_body": "Document text as the documentation server returned it; the original "
    "document was not read independently.",
    "provider_text": "Page text as the search provider extracted it; this service did not "
    "read the page itself.",
}


class ChainLink(Frozen):
    """One adapter attempt as plan → receipt → admission → retirement."""

    adapter_id: str
    attempt_status: str
    plan: EvidencePlan
    receipt: EvidenceReceipt
    receipt_digest: str
    admission: Admission
    retirement: Retirement


class ChainRetirement(Frozen):
    """Whether the answer's admitted evidence may retire, and if not, why."""

    ready: bool
    reasons: tuple[str, ...]


class ChainRecord(Frozen):
    """Everything one answer bound. ``decided_at`` is metadata, outside every hash."""

    schema_version: Literal["external_evidence_chain_v0"] = SCHEMA_CHAIN
    question: str
    request: EvidenceRequest
    links: tuple[ChainLink, ...]
    downstream_source_refs: tuple[str, ...]
    retirement: ChainRetirement
    decided_at: str

    @property
    def plan_ids(self) -> tuple[str, ...]:
        """One evidence plan id per adapter attempt made, in attempt order."""
        return tuple(link.plan.plan_id for link in self.links)

    @property
    def receipt_digests(self) -> tuple[str, ...]:
        """The digest of each attempt's receipt, in attempt order."""
        return tuple(link.receipt_digest for link in self.links)

    @property
    def admission_ids(self) -> tuple[str, ...]:
        """The id of each attempt's admission decision, in attempt order."""
        return tuple(link.admission.admission_id for link in self.links)

    def summary(self, *, persisted: bool) -> AdmissionSummary:
        """What the answer shows of this chain (``persisted``: written to the ledger)."""
        return AdmissionSummary(
            request_id=self.request.request_id,
            plan_ids=self.plan_ids,
            receipt_digests=self.receipt_digests,
            admission_ids=self.admission_ids,
            retirement_ready=self.retirement.ready,
            retirement_reasons=self.retirement.reasons,
            persisted=persisted,
        )

    def audit_detail(self) -> dict[str, JsonValue]:
        """The compact part for an audit event (ids, decisions, readiness)."""
        return {
            "request_id": self.request.request_id,
            "plan_ids": list(self.plan_ids),
            "receipt_digests": list(self.receipt_digests),
            "admission_ids": list(self.admission_ids),
            "admissions": [
                {
                    "adapter": link.adapter_id,
                    "receipt_status": link.receipt.status,
                    "decision": link.admission.decision,
                    "admitted": list(link.admission.admitted_source_refs),
                    "state": link.retirement.state,
                }
                for link in self.links
            ],
            "downstream_source_refs": list(self.downstream_source_refs),
            "retirement_ready": self.retirement.ready,
            "retirement_reasons": list(self.retirement.reasons),
        }


# -- the envelope ----------------------------------------------------------------------------


def _json_safe(value: Any) -> JsonValue:
    """JSON without floats: floats and big integers become decimal strings, paths text."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return value if abs(value) <= 2**53 - 1 else str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, Mapping):
        return {str(key): _json_safe(item) for key, item in sorted(value.items())}
    if isinstance(value, list | tuple | set | frozenset):
        items = [_json_safe(item) for item in value]
        return sorted(items, key=str) if isinstance(value, set | frozenset) else items
    return str(value)


def _milliseconds(seconds: float) -> int:
    return round(seconds * 1000)


def service_envelope(settings: Settings) -> dict[str, JsonValue]:
    """Network policy, budgets and adapter settings of a service, hashable (durations in
    integer milliseconds, never floats). How fresh a kept reply may be is added only when
    ``[cache]`` changes it from the defaults, so envelopes of settings without one stay as
    they were; sizes, caps and concurrency never enter."""
    network = settings.network
    envelope: dict[str, JsonValue] = {
        "network": {
            "allowed_networks": _json_safe(sorted(str(item) for item in network.allowed_networks)),
            "resolve": _json_safe(network.resolve),
            "max_redirects": network.max_redirects,
            "user_agent": network.user_agent,
        },
        "budgets": {
            "timeout_ms": _milliseconds(network.timeout_s),
            "deadline_ms": _milliseconds(network.deadline_s),
            "max_page_bytes": network.max_page_bytes,
            "max_pages": network.max_pages,
        },
        "sources": {
            "allow_domains": list(settings.sources.allow_domains),
            "deny_domains": list(settings.sources.deny_domains),
        },
        "adapters": {adapter.id: _json_safe(adapter.envelope()) for adapter in settings.adapters},
    }
    cache, default = settings.cache, CacheSettings()
    if (cache.enabled, cache.default_ttl_s) != (default.enabled, default.default_ttl_s):
        envelope["cache"] = {
            "enabled": cache.enabled,
            "default_ttl_ms": _milliseconds(cache.default_ttl_s),
        }
    return envelope


def _query(plan: ExternalQueryPlan) -> dict[str, JsonValue]:
    return {
        "query_kind": plan.query_kind,
        "answer_contract": plan.answer_contract,
        "search_queries": list(plan.search_queries),
        "entities": list(plan.entities),
        "compare_targets": list(plan.compare_targets),
        "location": plan.location,
        "time_range": (
            {"start": plan.time_range.start.isoformat(), "end": plan.time_range.end.isoformat()}
            if plan.time_range
            else None
        ),
        "freshness_required": plan.freshness_required,
        "language": plan.language,
    }


# -- binding ---------------------------------------------------------------------------------


def _candidate(item: RankedAdapter) -> ProviderRow:
    ready = item.excluded != "not_ready"
    return ProviderRow(
        provider_id=item.adapter_id,
        provider_kind="connector",
        protocol=PROTOCOL,
        declared=True,
        installed=True,
        # The gateway's own readiness code for a switched-off adapter is "disabled".
        enabled=ready or item.readiness_reason != "disabled",
        ready=ready,
        unavailable_reason=None if ready else item.reason,
        observed_by="gateway",
    )


def _aware(moment: datetime) -> datetime:
    return moment if moment.utcoffset() is not None else moment.replace(tzinfo=UTC)


def _source(evidence: Evidence) -> dict[str, Any]:
    return {
        "source_ref": evidence.evidence_id,
        "source_family": evidence.provider_type,
        "basis": evidence.basis,
        "finding": compact(evidence.snippet) or "(empty snippet)",
        "limitation": _LIMITATION.get(evidence.basis, "Scope as the provider reported it."),
        "publication_date": evidence.published_at.isoformat() if evidence.published_at else None,
        "accessed_at": _aware(evidence.accessed_at).isoformat(),
        "content_digest": evidence.content_digest,
        "url": _normal_url(evidence.url),
    }


def _receipt(
    plan: EvidencePlan,
    attempt: AdapterAttempt,
    evidence: Sequence[Evidence],
    completed_at: datetime,
) -> EvidenceReceipt:
    status = _RECEIPT_STATUS[attempt.status]
    limitations = ["Derived from the gateway's attempt record; not provider execution attestation."]
    if attempt.reason:
        limitations.append(f"attempt reason: {attempt.reason}")
    if status == "succeeded" and not evidence:
        # Its evidence was identical to another adapter's and is in that receipt.
        status = "no_evidence"
        limitations.append("evidence deduplicated into another adapter's receipt")
    sources = [_source(item) for item in evidence] if status == "succeeded" else []
    latest = max((_aware(item.accessed_at) for item in evidence), default=completed_at)
    data = {
        "schema_version": "external_evidence_receipt_v0",
        "plan_id": plan.plan_id,
        "request_id": plan.request.request_id,
        "provider_id": plan.selected_provider.provider_id,
        "provider_kind": plan.selected_provider.provider_kind,
        "status": status,
        "sources": sources,
        "summary": f"{attempt.adapter_id}: attempt {attempt.status}, "
        f"{len(sources)} source(s), {attempt.results} result(s)",
        "limitations": limitations,
        "completed_at": max(completed_at, latest).isoformat(),
    }
    return parse_model(EvidenceReceipt, data, "invalid_receipt")


def _admission(
    plan: EvidencePlan, receipt: EvidenceReceipt, digest: str, verifier: VerifierResult
) -> Admission:
    verdicts = {item.evidence_id: item for item in (*verifier.accepted, *verifier.rejected)}
    decisions = []
    for ref in receipt.source_refs:
        verdict = verdicts.get(ref)
        decisions.append(
            SourceDecision(
                source_ref=ref,
                decision=verdict.decision if verdict else "reject",
                reason=verdict.reason if verdict else "not_judged",
            )
        )
    admitted = [item.source_ref for item in decisions if item.decision == "admit"]
    outcome = verifier.status + (f" ({verifier.reason})" if verifier.reason else "")
    if not receipt.sources:
        reason = f"no sources to admit: receipt {receipt.status}; verifier {outcome}"
    elif admitted:
        reason = f"verifier admitted {len(admitted)} of {len(decisions)} source(s); {outcome}"
    else:
        reason = f"verifier rejected every source; {outcome}"
    # Plan and receipt were built just now (``build_plan``, ``_receipt``): bound as they
    # are, without verifying and hashing them over again.
    return decide_built(
        plan,
        receipt,
        receipt_digest=digest,
        decision="admit" if admitted else "reject",
        reason=reason,
        admit_sources=admitted,
        decided_by="verifier",
        source_decisions=decisions,
    )


def _normal_url(url: str) -> str:
    # The presenter shows URLs with whitespace percent-encoded; compare the same way.
    return "%20".join(url.strip().split())


def bind_answer(
    *,
    question: str,
    plan: ExternalQueryPlan,
    gathered: GatherResult,
    verifier: VerifierResult,
    envelope: Mapping[str, Any],
    presented_urls: Sequence[str],
    decided_at: datetime,
    completed_at: datetime | None = None,
) -> ChainRecord:
    """Bind one answer: a plan per non-skipped attempt (each selects exactly that
    adapter), its receipt, the verifier's decisions as an admission, and the presented
    sources as the readback. ``envelope`` is ``service_envelope(settings)`` (or any
    float-free JSON object); ``completed_at`` (default ``decided_at``) ends the gather."""
    request = build_request(question, USER_ACTIVITY, plan.answer_contract, [plan.query_kind])
    candidates = {item.adapter_id: _candidate(item) for item in gathered.ranking}
    for attempt in gathered.attempts:
        row = candidates.get(attempt.adapter_id)
        if attempt.status != "skipped" and (row is None or not row.ready):
            # The gateway tries only ready adapters: the attempt is the observation.
            candidates[attempt.adapter_id] = _candidate(_unranked(attempt))
    plan_envelope: dict[str, JsonValue] = {
        str(key): _json_safe(value) for key, value in envelope.items()
    }
    plan_envelope["query"] = _query(plan)
    presented = {_normal_url(url) for url in presented_urls}
    downstream = tuple(
        item.evidence_id for item in gathered.gathered if _normal_url(item.url) in presented
    )
    finished = _aware(completed_at or decided_at)
    links: list[ChainLink] = []
    for attempt in gathered.attempts:
        if attempt.status == "skipped":
            continue
        evidence_plan = build_plan(
            request,
            list(candidates.values()),
            preferred_provider_id=attempt.adapter_id,
            envelope=plan_envelope,
        )
        own = [item for item in gathered.gathered if item.adapter_id == attempt.adapter_id]
        receipt = _receipt(evidence_plan, attempt, own, finished)
        digest = receipt_digest(receipt)
        admission = _admission(evidence_plan, receipt, digest, verifier)
        links.append(
            ChainLink(
                adapter_id=attempt.adapter_id,
                attempt_status=attempt.status,
                plan=evidence_plan,
                receipt=receipt,
                receipt_digest=digest,
                admission=admission,
                retirement=retire_built(admission, downstream),
            )
        )
    reasons = [
        f"{link.adapter_id}:{reason}"
        for link in links
        if not link.retirement.ready
        for reason in link.retirement.reasons
    ]
    return ChainRecord(
        question=question,
        request=request,
        links=tuple(links),
        downstream_source_refs=tuple(sorted(set(downstream))),
        retirement=ChainRetirement(ready=not reasons, reasons=tuple(reasons)),
        decided_at=_aware(decided_at).isoformat(),
    )


def _unranked(attempt: AdapterAttempt) -> RankedAdapter:
    # An attempt always comes from the ranking; this keeps a foreign GatherResult usable.
    return RankedAdapter(
        adapter_id=attempt.adapter_id,
        provider_type=attempt.provider_type,
        rank=attempt.rank,
        reason="attempted",
    )
