"""Admission records and answer chains for ledger tests, built the way the contract builds
them (and quickly: no service, no network)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from external_query_service.admission import (
    PROTOCOL,
    build_plan,
    build_request,
    content_id,
    decide,
    parse_inventory,
    parse_receipt,
    retire,
)
from external_query_service.admission._chain import ChainLink, ChainRecord, ChainRetirement
from external_query_service.admission._models import Admission, EvidencePlan, EvidenceReceipt
from external_query_service.admission._receipt import receipt_digest
from external_query_service.storage import LedgerTarget

OBJECTIVE = "Is the literal present in the public source?"
SOURCES = [f"https://example.com/doc-{index}" for index in range(4)]


def make_plan(objective: str = OBJECTIVE) -> EvidencePlan:
    inventory = {
        "providers": [
            {
                "provider_id": "connector:docs",
                "provider_kind": "connector",
                "protocol": PROTOCOL,
                "declared": True,
                "installed": True,
                "enabled": True,
                "ready": True,
            }
        ]
    }
    request = build_request(objective, "Choose a source", "Whether to adopt", ["literal_match"])
    return build_plan(request, parse_inventory(inventory))


def make_receipt(plan: EvidencePlan, refs: list[str] = SOURCES) -> EvidenceReceipt:
    return parse_receipt(
        {
            "schema_version": "external_evidence_receipt_v0",
            "plan_id": plan.plan_id,
            "request_id": plan.request.request_id,
            "provider_id": "connector:docs",
            "provider_kind": "connector",
            "status": "succeeded",
            "sources": [
                {
                    "source_ref": ref,
                    "source_family": "original-publisher",
                    "basis": "observed",
                    "finding": f"finding for {ref}",
                    "limitation": "one page only",
                    "publication_date": "2026-01-02",
                    "accessed_at": "2026-03-01T10:00:00Z",
                    "content_digest": content_id({"ref": ref}),
                }
                for ref in refs
            ],
            "summary": "s",
            "limitations": [],
            "completed_at": "2026-03-01T10:01:00Z",
        }
    )


def admitted(plan: EvidencePlan, receipt: EvidenceReceipt, refs: list[str]) -> Admission:
    return decide(plan, receipt, decision="admit", reason="direct", admit_sources=refs)


def make_chain(question: str) -> ChainRecord:
    """One answer to ``question``: a plan, its receipt and admission, and the chain record
    tying them (four ledger records, all new for a new question)."""
    plan = make_plan(question)
    receipt = make_receipt(plan, SOURCES[:2])
    admission = admitted(plan, receipt, SOURCES[:2])
    link = ChainLink(
        adapter_id="docs",
        attempt_status="ok",
        plan=plan,
        receipt=receipt,
        receipt_digest=receipt_digest(receipt),
        admission=admission,
        retirement=retire(admission, SOURCES[:2]),
    )
    return ChainRecord(
        question=question,
        request=plan.request,
        links=(link,),
        downstream_source_refs=tuple(SOURCES[:2]),
        retirement=ChainRetirement(ready=True, reasons=()),
        decided_at="2026-03-01T10:02:00Z",
    )


def raw(target: LedgerTarget, statement: str, params: Sequence[Any] = ()) -> list[Any]:
    """Run ``statement`` (``?`` placeholders) on a ledger's storage behind its back."""
    if isinstance(target, Path):
        db = sqlite3.connect(target)
        try:
            rows = db.execute(statement, params).fetchall()
            db.commit()
        finally:
            db.close()
        return rows
    import psycopg

    with psycopg.connect(target, autocommit=True) as conn:
        cursor = conn.execute(statement.replace("?", "%s"), params)
        return cursor.fetchall() if cursor.description else []
