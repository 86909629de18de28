"""Downstream projection: only compact findings, limitations, references, basis, dates and
digests leave the contract — never bodies, raw pages or provider-private metadata."""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Mapping
from typing import Any

from ._admit import check_admission, verify_admission
from ._models import (
    Admission,
    DownstreamSource,
    EvidencePlan,
    EvidenceReceipt,
    LedgerCoverage,
    Readback,
    ReadbackSource,
)
from ._plan import verify_plan
from ._receipt import check_identity, parse_receipt, receipt_digest
from ._retire import retire

__all__ = ["COMPACT_CHARS", "compact", "project"]

#: A compact finding is one line of at most this many characters.
COMPACT_CHARS = 600


def compact(text: str, limit: int = COMPACT_CHARS) -> str:
    """One line: control and format characters dropped, whitespace collapsed, cut at
    ``limit`` characters with an ellipsis."""
    line = " ".join(text.split())
    if not line.isprintable():  # only then can a control or format character be left
        kept = "".join(
            " " if char.isspace() else char
            for char in text
            if char.isspace() or unicodedata.category(char) not in ("Cc", "Cf")
        )
        line = " ".join(kept.split())
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


def project(
    plan: Mapping[str, Any] | EvidencePlan,
    receipt: Mapping[str, Any] | EvidenceReceipt,
    admission: Mapping[str, Any] | Admission | None = None,
    *,
    ledger: LedgerCoverage | None = None,
    downstream: Iterable[DownstreamSource | str] = (),
) -> Readback:
    """The shared readback of a plan, its receipt and (optionally) the admission.

    Everything is re-verified first (same reasons as ``receipt`` and ``admit``). With an
    admission, retirement readiness counts ``downstream`` plus what ``ledger`` holds
    with matching lineage.
    """
    checked_plan = verify_plan(plan)
    checked = parse_receipt(receipt)
    check_identity(checked_plan, checked)
    decided: Admission | None = None
    if admission is not None:
        decided = verify_admission(admission)
        check_admission(checked_plan, checked, decided)
    admitted = set(decided.admitted_source_refs) if decided else set()
    in_ledger = set(ledger.present_source_refs) if ledger else set()
    sources = tuple(
        ReadbackSource(
            source_ref=item.source_ref,
            url=item.url,
            source_family=compact(item.source_family, 120),
            basis=compact(item.basis, 120),
            finding=compact(item.finding),
            limitation=compact(item.limitation),
            publication_date=item.publication_date,
            accessed_at=item.accessed_at,
            content_digest=item.content_digest,
            admitted=(item.source_ref in admitted) if decided else None,
            in_ledger=(item.source_ref in in_ledger) if ledger else None,
        )
        for item in checked.sources
    )
    retirement = None
    if decided is not None:
        seen: list[DownstreamSource | str] = list(downstream)
        if ledger is not None:
            digests = {item.source_ref: item.content_digest for item in decided.admitted_sources}
            seen.extend(
                DownstreamSource(
                    source_ref=ref,
                    admission_id=decided.admission_id,
                    content_digest=digests[ref],
                )
                for ref in ledger.present_source_refs
                if ref in digests
            )
        retirement = retire(decided, seen)
    request = checked_plan.request
    return Readback(
        plan_id=checked_plan.plan_id,
        request_id=request.request_id,
        objective=request.objective,
        user_activity=request.user_activity,
        decision=request.decision,
        evidence_kinds=request.evidence_kinds,
        provider_id=checked.provider_id,
        provider_kind=checked.provider_kind,
        receipt_digest=receipt_digest(checked),
        receipt_status=checked.status,
        summary=compact(checked.summary),
        limitations=tuple(compact(item) for item in checked.limitations if item.strip()),
        completed_at=checked.completed_at,
        sources=sources,
        admission_id=decided.admission_id if decided else None,
        admission_decision=decided.decision if decided else None,
        admission_reason=compact(decided.reason) if decided else None,
        decided_by=decided.decided_by if decided else None,
        ledger=ledger,
        retirement=retirement,
    )
