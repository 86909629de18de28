"""receipt: check a caller-presented receipt against its (re-verified) plan.

The result is an observation: the receipt was seen, its identity matches the plan, its
per-source provenance is well formed. It is not proof that the provider ran, not
coverage, and not admission.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import ContractRejected
from ._canonical import content_id
from ._models import EvidencePlan, EvidenceReceipt, ReceiptObservation, parse_model
from ._plan import verify_plan

__all__ = [
    "check_identity",
    "check_receipt",
    "parse_receipt",
    "receipt_digest",
]


def parse_receipt(data: Mapping[str, Any] | EvidenceReceipt) -> EvidenceReceipt:
    """Shape and provenance rules (``invalid_receipt`` or the rule's own reason, e.g.
    ``sources_on_empty_receipt``, ``duplicate_source_ref``, ``invalid_digest``)."""
    if isinstance(data, EvidenceReceipt):
        return data
    return parse_model(EvidenceReceipt, data, "invalid_receipt")


def receipt_digest(receipt: EvidenceReceipt) -> str:
    """The id of the complete receipt (every field, as given)."""
    return content_id(receipt.hashed())


def check_identity(plan: EvidencePlan, receipt: EvidenceReceipt) -> None:
    """The receipt must echo the plan's identity exactly."""
    if receipt.plan_id != plan.plan_id:
        raise ContractRejected(
            "plan_id_mismatch", f"receipt names {receipt.plan_id}, the plan is {plan.plan_id}"
        )
    if receipt.request_id != plan.request.request_id:
        raise ContractRejected("request_id_mismatch", "the receipt echoes another request_id")
    selected = plan.selected_provider
    if receipt.provider_id != selected.provider_id:
        raise ContractRejected(
            "foreign_provider",
            f"receipt from {receipt.provider_id}, the plan selected {selected.provider_id}",
        )
    if receipt.provider_kind != selected.provider_kind:
        raise ContractRejected("provider_kind_mismatch", "the receipt echoes another kind")


def check_receipt(
    plan: Mapping[str, Any] | EvidencePlan, receipt: Mapping[str, Any] | EvidenceReceipt
) -> ReceiptObservation:
    """Verify the plan, then the receipt's shape and identity; record what was seen."""
    checked_plan = verify_plan(plan)
    checked = parse_receipt(receipt)
    check_identity(checked_plan, checked)
    return ReceiptObservation(
        plan_id=checked.plan_id,
        request_id=checked.request_id,
        provider_id=checked.provider_id,
        provider_kind=checked.provider_kind,
        receipt_digest=receipt_digest(checked),
        status=checked.status,
        source_refs=checked.source_refs,
        completed_at=checked.completed_at,
    )
