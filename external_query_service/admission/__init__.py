"""The evidence admission contract (pure: no I/O, no clock reads).

discover → plan → (provider executes) → receipt → admit → readback → retire, every record
content-addressed with RFC 8785 canonical JSON and ``sha256:<hex>`` ids.
"""

from ..errors import INPUT_ERROR_REASONS, ContractRejected, EvidenceInputError
from ._admit import admission_id_of, check_admission, decide, verify_admission
from ._canonical import HASH_CONTRACT, canonical_json, content_id, loads_record, loads_value
from ._chain import ChainLink, ChainRecord, ChainRetirement, bind_answer, service_envelope
from ._discover import discover, parse_inventory, project_row, registry_rows
from ._models import (
    PROTOCOL,
    Admission,
    AdmittedSource,
    DownstreamSource,
    EvidencePlan,
    EvidenceReceipt,
    EvidenceRequest,
    LedgerCoverage,
    ProviderInventory,
    ProviderRow,
    ProviderSelection,
    Readback,
    ReadbackSource,
    ReceiptObservation,
    ReceiptSource,
    Retirement,
    SourceDecision,
)
from ._plan import build_plan, build_request, normalize_one_line, plan_id_of, verify_plan
from ._projection import compact, project
from ._receipt import check_receipt, parse_receipt, receipt_digest
from ._render import render, render_error
from ._retire import retire

__all__ = [
    "HASH_CONTRACT",
    "INPUT_ERROR_REASONS",
    "PROTOCOL",
    "Admission",
    "AdmittedSource",
    "ChainLink",
    "ChainRecord",
    "ChainRetirement",
    "ContractRejected",
    "DownstreamSource",
    "EvidenceInputError",
    "EvidencePlan",
    "EvidenceReceipt",
    "EvidenceRequest",
    "LedgerCoverage",
    "ProviderInventory",
    "ProviderRow",
    "ProviderSelection",
    "Readback",
    "ReadbackSource",
    "ReceiptObservation",
    "ReceiptSource",
    "Retirement",
    "SourceDecision",
    "admission_id_of",
    "bind_answer",
    "build_plan",
    "build_request",
    "canonical_json",
    "check_admission",
    "check_receipt",
    "compact",
    "content_id",
    "decide",
    "discover",
    "loads_record",
    "loads_value",
    "normalize_one_line",
    "parse_inventory",
    "parse_receipt",
    "plan_id_of",
    "project",
    "project_row",
    "receipt_digest",
    "registry_rows",
    "render",
    "render_error",
    "retire",
    "service_envelope",
    "verify_admission",
    "verify_plan",
]
