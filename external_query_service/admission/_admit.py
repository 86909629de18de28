"""admit: an explicit admit or reject, bound to the complete receipt digest.

Never automatic: the caller (the parent agent, or the verifier inside the chain) names
the decision, the reason and every admitted source; each must be in the receipt. The
``admission_id`` addresses the whole admission and holds no clock value, so the same
decision made twice is the same record.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from ..errors import ContractRejected
from ._canonical import content_id
from ._models import Admission, EvidencePlan, EvidenceReceipt, SourceDecision, parse_model
from ._plan import verify_plan
from ._receipt import check_identity, parse_receipt, receipt_digest

__all__ = [
    "admission_id_of",
    "check_admission",
    "decide",
    "decide_built",
    "verify_admission",
]


def admission_id_of(admission: Admission) -> str:
    """The content id of ``admission``: its canonical JSON without ``admission_id``."""
    return content_id(admission.model_dump(mode="json", exclude={"admission_id"}))


def decide(
    plan: Mapping[str, Any] | EvidencePlan,
    receipt: Mapping[str, Any] | EvidenceReceipt,
    *,
    decision: Literal["admit", "reject"],
    reason: str,
    admit_sources: Iterable[str] = (),
    decided_by: Literal["parent", "verifier"] = "parent",
    source_decisions: Sequence[SourceDecision] = (),
) -> Admission:
    """Validate plan, receipt and provenance, then record the decision.

    Rejections: the plan's and receipt's own reasons, ``unknown_source`` (an admitted ref
    is not in the receipt), ``nothing_admitted``, ``rejected_with_admitted_sources``,
    ``missing_reason``.
    """
    checked_plan = verify_plan(plan)
    checked = parse_receipt(receipt)
    return decide_built(
        checked_plan,
        checked,
        receipt_digest=receipt_digest(checked),
        decision=decision,
        reason=reason,
        admit_sources=admit_sources,
        decided_by=decided_by,
        source_decisions=source_decisions,
    )


def decide_built(
    checked_plan: EvidencePlan,
    checked: EvidenceReceipt,
    *,
    receipt_digest: str,
    decision: Literal["admit", "reject"],
    reason: str,
    admit_sources: Iterable[str] = (),
    decided_by: Literal["parent", "verifier"] = "parent",
    source_decisions: Sequence[SourceDecision] = (),
) -> Admission:
    """``decide`` for a plan and receipt the caller has just built itself (``build_plan``,
    a validated receipt) with the receipt's digest already computed: they are not
    re-verified and re-hashed (the answer chain binds every answer this way). The
    identity and provenance rules still apply; ``decide`` is for presented records."""
    check_identity(checked_plan, checked)
    if not reason.strip():
        raise ContractRejected("missing_reason", "an admission states its reason")
    refs = sorted(set(admit_sources))
    unknown = [ref for ref in refs if ref not in checked.source_refs]
    if unknown:
        raise ContractRejected("unknown_source", f"not in the receipt: {', '.join(unknown)}")
    body: dict[str, Any] = {
        "plan_id": checked_plan.plan_id,
        "request_id": checked_plan.request.request_id,
        "provider_id": checked.provider_id,
        "provider_kind": checked.provider_kind,
        "receipt_digest": receipt_digest,
        "receipt_status": checked.status,
        "receipt_source_refs": sorted(checked.source_refs),
        "decision": decision,
        "reason": reason.strip(),
        "decided_by": decided_by,
        "admitted_sources": [
            {"source_ref": ref, "content_digest": checked.source(ref).content_digest}
            for ref in refs
        ],
        "source_decisions": [
            item.model_dump(mode="json")
            for item in sorted(source_decisions, key=lambda item: item.source_ref)
        ],
    }
    draft = parse_model(
        Admission, {**body, "admission_id": "sha256:" + "0" * 64}, "invalid_admission"
    )
    return draft.model_copy(update={"admission_id": admission_id_of(draft)})


def verify_admission(data: Mapping[str, Any] | Admission) -> Admission:
    """A presented admission, re-validated and re-hashed (``admission_tampered``)."""
    admission = (
        data if isinstance(data, Admission) else parse_model(Admission, data, "invalid_admission")
    )
    if admission_id_of(admission) != admission.admission_id:
        raise ContractRejected("admission_tampered", "it does not hash to its admission_id")
    if list(admission.receipt_source_refs) != sorted(admission.receipt_source_refs) or list(
        admission.admitted_source_refs
    ) != sorted(admission.admitted_source_refs):
        # A reason code on the wire (the CLI's JSON "code"): it keeps its published spelling.
        raise ContractRejected("admission_not_normalised", "source refs must be sorted")
    return admission


def check_admission(plan: EvidencePlan, receipt: EvidenceReceipt, admission: Admission) -> None:
    """The admission belongs to exactly this plan and this complete receipt."""
    verify_admission(admission)
    if admission.plan_id != plan.plan_id or admission.request_id != plan.request.request_id:
        raise ContractRejected("admission_plan_mismatch", "the admission is for another plan")
    if admission.receipt_digest != receipt_digest(receipt):
        raise ContractRejected(
            "receipt_digest_mismatch", "the admission is bound to another receipt"
        )
    for item in admission.admitted_sources:
        if item.source_ref not in receipt.source_refs:
            raise ContractRejected("unknown_source", item.source_ref)
        if receipt.source(item.source_ref).content_digest != item.content_digest:
            raise ContractRejected("content_digest_mismatch", item.source_ref)
