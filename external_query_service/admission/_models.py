"""The records of the admission contract, as frozen pydantic models.

Hashed records (request, plan, receipt, admission) hold only strings, integers, booleans
and null: timestamps are ISO strings kept exactly as given (a reformatted timestamp would
change a digest), scores are integer basis points, measurements decimal strings.
Cross-field rules raise errors whose ``type`` is the rule's reason code, so a rejection
can name it (see ``contract_error``).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date, datetime
from typing import Annotated, Any, Final, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    StrictBool,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from .._frozen import Frozen
from ..errors import ContractRejected, EvidenceInputError
from ..settings import format_validation_error
from ._canonical import HASH_CONTRACT, check_hashable, is_digest

__all__ = [
    "PROTOCOL",
    "RULE_REASONS",
    "SCHEMA_ADMISSION",
    "SCHEMA_INVENTORY",
    "SCHEMA_OBSERVATION",
    "SCHEMA_PLAN",
    "SCHEMA_READBACK",
    "SCHEMA_RECEIPT",
    "SCHEMA_REQUEST",
    "SCHEMA_RETIREMENT",
    "Admission",
    "AdmittedSource",
    "DownstreamSource",
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
    "contract_error",
    "parse_model",
]

PROTOCOL: Final = "external_evidence_research_v0"
SCHEMA_INVENTORY: Final = "external_evidence_inventory_v0"
SCHEMA_REQUEST: Final = "external_evidence_request_v0"
SCHEMA_PLAN: Final = "external_evidence_plan_v0"
SCHEMA_RECEIPT: Final = "external_evidence_receipt_v0"
SCHEMA_OBSERVATION: Final = "external_evidence_receipt_observation_v0"
SCHEMA_ADMISSION: Final = "external_evidence_admission_v0"
SCHEMA_READBACK: Final = "external_evidence_readback_v0"
SCHEMA_RETIREMENT: Final = "external_evidence_retirement_v0"

ProviderKind = Literal["method", "connector"]
ReceiptStatus = Literal["succeeded", "no_evidence", "failed"]
Decision = Literal["admit", "reject"]
DecidedBy = Literal["parent", "verifier"]


class _Frozen(Frozen):
    model_config = ConfigDict(strict=True)


def _text(value: str) -> str:
    if not value.strip():
        raise PydanticCustomError("empty_text", "must not be empty")
    return value


def _ref(value: str) -> str:
    # ``split`` breaks at exactly the characters ``str.isspace`` names, in C.
    if value.split(maxsplit=1) != [value]:
        raise PydanticCustomError("invalid_ref", "must be non-empty without whitespace")
    return value


def _digest(value: str) -> str:
    if not is_digest(value):
        raise PydanticCustomError("invalid_digest", "must read sha256:<64 lowercase hex>")
    return value


def _moment(value: str) -> str:
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise PydanticCustomError("invalid_timestamp", "not an ISO 8601 datetime") from None
    if moment.utcoffset() is None:
        raise PydanticCustomError("invalid_timestamp", "an ISO datetime needs an offset")
    return value


def _day(value: str) -> str:
    try:
        date.fromisoformat(value[:10])
        if len(value) > 10:
            _moment(value)
    except ValueError:
        raise PydanticCustomError("invalid_date", "not an ISO 8601 date") from None
    return value


Text = Annotated[str, Field(max_length=20_000), AfterValidator(_text)]
Ref = Annotated[str, Field(max_length=2048), AfterValidator(_ref)]
Digest = Annotated[str, AfterValidator(_digest)]
Moment = Annotated[str, AfterValidator(_moment)]
Day = Annotated[str, AfterValidator(_day)]


def _moment_value(text: str) -> datetime:
    return datetime.fromisoformat(text)


# -- discover ------------------------------------------------------------------------------


class ProviderRow(_Frozen):
    """One provider as the inventory projects it.

    ``ready`` is true only when declared, installed and enabled are too, the protocol is
    ours, and the row was not merely present in a registry; otherwise
    ``unavailable_reason`` says why not.
    """

    provider_id: Ref
    provider_kind: ProviderKind
    protocol: str
    declared: StrictBool
    installed: StrictBool
    enabled: StrictBool
    ready: StrictBool
    unavailable_reason: str | None = None
    #: Who observed the row: a caller's inventory, a real probe, the gateway's own
    #: attempt, or mere registry presence (never readiness).
    observed_by: Literal["caller", "probe", "gateway", "registry"] = "caller"

    @model_validator(mode="after")
    def _consistent(self) -> ProviderRow:
        if self.ready:
            if not (self.declared and self.installed and self.enabled):
                raise PydanticCustomError(
                    "ready_without_lifecycle", "ready needs declared, installed and enabled"
                )
            if self.protocol != PROTOCOL or self.observed_by == "registry":
                raise PydanticCustomError(
                    "ready_without_probe", "ready needs our protocol and a real observation"
                )
            if self.unavailable_reason is not None:
                raise PydanticCustomError(
                    "ready_with_reason", "a ready row has no unavailable_reason"
                )
        elif not (self.unavailable_reason or "").strip():
            raise PydanticCustomError(
                "missing_unavailable_reason", "a row that is not ready says why"
            )
        return self


class ProviderInventory(_Frozen):
    """Discovery output: an observation of providers, never proof they ran or covered
    anything (the two flags stay false by construction)."""

    schema_version: Literal["external_evidence_inventory_v0"] = SCHEMA_INVENTORY
    protocol: Literal["external_evidence_research_v0"] = PROTOCOL
    providers: tuple[ProviderRow, ...]
    execution_observed: Literal[False] = False
    evidence_coverage_observed: Literal[False] = False

    @property
    def ready(self) -> tuple[ProviderRow, ...]:
        """The rows whose provider is ready, in inventory order."""
        return tuple(row for row in self.providers if row.ready)


# -- plan ----------------------------------------------------------------------------------


class EvidenceRequest(_Frozen):
    """The normalized request; ``request_id`` addresses every other field."""

    schema_version: Literal["external_evidence_request_v0"] = SCHEMA_REQUEST
    request_id: Digest
    objective: Text
    user_activity: Text
    decision: Text
    evidence_kinds: tuple[Ref, ...] = Field(min_length=1)


class ProviderSelection(_Frozen):
    """The provider a plan chose and why it was chosen."""

    provider_id: Ref
    provider_kind: ProviderKind
    #: ``preferred``: the caller named it; ``only_ready``: it was the one ready candidate.
    selected_by: Literal["preferred", "only_ready"]


class EvidencePlan(_Frozen):
    """A request bound to exactly one ready provider. ``plan_id`` addresses the request,
    the candidate inventory, the selection and the execution envelope — and no clock."""

    schema_version: Literal["external_evidence_plan_v0"] = SCHEMA_PLAN
    hash_contract: Literal["rfc8785-sha256/v0"] = HASH_CONTRACT
    plan_id: Digest
    request: EvidenceRequest
    candidates: tuple[ProviderRow, ...] = Field(min_length=1)
    preferred_provider_id: Ref | None = None
    selected_provider: ProviderSelection
    envelope: dict[str, JsonValue]

    @field_validator("envelope")
    @classmethod
    def _hashable(cls, value: dict[str, JsonValue]) -> dict[str, JsonValue]:
        try:
            check_hashable(value, where="envelope")
        except EvidenceInputError as exc:
            raise PydanticCustomError(exc.reason, str(exc)) from None
        return value

    @property
    def objective(self) -> str:
        """The request's objective."""
        return self.request.objective


# -- receipt -------------------------------------------------------------------------------


class ReceiptSource(_Frozen):
    """Per-source provenance. ``finding`` is the bounded observation; ``limitation`` what
    was not inspected; ``accessed_at`` when it was read (not published);
    ``content_digest`` the digest of the content inspected."""

    source_ref: Ref
    source_family: Text
    basis: Text
    finding: Text
    limitation: Text
    publication_date: Day | None
    accessed_at: Moment
    content_digest: Digest
    #: The direct link, when ``source_ref`` is an opaque id rather than a URL.
    url: Ref | None = None


class EvidenceReceipt(_Frozen):
    """A caller-presented receipt. It echoes the plan's identity; ``failed`` and
    ``no_evidence`` carry no sources. An observation, never execution proof."""

    schema_version: Literal["external_evidence_receipt_v0"]
    plan_id: Digest
    request_id: Digest
    provider_id: Ref
    provider_kind: ProviderKind
    status: ReceiptStatus
    sources: tuple[ReceiptSource, ...]
    summary: str = ""
    limitations: tuple[str, ...] = ()
    completed_at: Moment

    @model_validator(mode="after")
    def _consistent(self) -> EvidenceReceipt:
        if self.status != "succeeded" and self.sources:
            raise PydanticCustomError(
                "sources_on_empty_receipt", "failed and no_evidence receipts carry no sources"
            )
        if self.status == "succeeded" and not self.sources:
            raise PydanticCustomError("succeeded_without_sources", "succeeded needs a source")
        refs = [source.source_ref for source in self.sources]
        if len(set(refs)) != len(refs):
            raise PydanticCustomError("duplicate_source_ref", "each source_ref appears once")
        completed = _moment_value(self.completed_at)
        for source in self.sources:
            if _moment_value(source.accessed_at) > completed:
                raise PydanticCustomError(
                    "accessed_after_completion", "a source was read after completed_at"
                )
        return self

    @property
    def source_refs(self) -> tuple[str, ...]:
        """Every source's ``source_ref``, in receipt order."""
        return tuple(source.source_ref for source in self.sources)

    def source(self, ref: str) -> ReceiptSource:
        """The source whose ``source_ref`` is ``ref``; ``KeyError`` when none is."""
        for item in self.sources:
            if item.source_ref == ref:
                return item
        raise KeyError(ref)

    def hashed(self) -> dict[str, Any]:
        """The record the receipt digest covers (``url`` omitted where absent)."""
        data = self.model_dump(mode="json")
        for source in data["sources"]:
            if source["url"] is None:
                del source["url"]
        return data


class ReceiptObservation(_Frozen):
    """What ``receipt`` records: the receipt was seen and matches its plan. Nothing more."""

    schema_version: Literal["external_evidence_receipt_observation_v0"] = SCHEMA_OBSERVATION
    plan_id: Digest
    request_id: Digest
    provider_id: Ref
    provider_kind: ProviderKind
    receipt_digest: Digest
    status: ReceiptStatus
    source_refs: tuple[str, ...]
    completed_at: Moment
    execution_attested: Literal[False] = False
    evidence_coverage_claimed: Literal[False] = False
    admitted: Literal[False] = False


# -- admission -----------------------------------------------------------------------------


class AdmittedSource(_Frozen):
    """A source the admission let in, pinned by its content digest."""

    source_ref: Ref
    content_digest: Digest


class SourceDecision(_Frozen):
    """One source's decision with its reason (the verifier records one per source)."""

    source_ref: Ref
    decision: Decision
    reason: Text


class Admission(_Frozen):
    """An explicit admit or reject bound to the complete receipt digest."""

    schema_version: Literal["external_evidence_admission_v0"] = SCHEMA_ADMISSION
    hash_contract: Literal["rfc8785-sha256/v0"] = HASH_CONTRACT
    admission_id: Digest
    plan_id: Digest
    request_id: Digest
    provider_id: Ref
    provider_kind: ProviderKind
    receipt_digest: Digest
    receipt_status: ReceiptStatus
    receipt_source_refs: tuple[Ref, ...]
    decision: Decision
    reason: Text
    decided_by: DecidedBy
    admitted_sources: tuple[AdmittedSource, ...]
    source_decisions: tuple[SourceDecision, ...] = ()

    @model_validator(mode="after")
    def _consistent(self) -> Admission:
        known = set(self.receipt_source_refs)
        refs = [item.source_ref for item in self.admitted_sources]
        if len(set(refs)) != len(refs):
            raise PydanticCustomError("duplicate_source_ref", "each admitted source once")
        if not set(refs) <= known:
            raise PydanticCustomError("unknown_source", "an admitted source is not in the receipt")
        if self.decision == "admit" and not refs:
            raise PydanticCustomError("nothing_admitted", "admit names at least one source")
        if self.decision == "reject" and refs:
            raise PydanticCustomError(
                "rejected_with_admitted_sources", "a rejection admits no source"
            )
        decided = {item.source_ref: item.decision for item in self.source_decisions}
        if self.source_decisions and (
            not set(decided) <= known
            or {ref for ref, choice in decided.items() if choice == "admit"} != set(refs)
        ):
            raise PydanticCustomError(
                "source_decisions_mismatch", "per-source decisions disagree with the admission"
            )
        return self

    @property
    def admitted_source_refs(self) -> tuple[str, ...]:
        """Every admitted source's ``source_ref``, in admission order."""
        return tuple(item.source_ref for item in self.admitted_sources)


# -- downstream ----------------------------------------------------------------------------


class DownstreamSource(_Frozen):
    """A source seen downstream. Lineage fields, when present, must match the admission."""

    source_ref: Ref
    admission_id: Digest | None = None
    content_digest: Digest | None = None


class Retirement(_Frozen):
    """Whether an admission can be retired: every admitted source read back (``retired``)
    or some still missing (``retained``, with the missing refs and reasons)."""

    schema_version: Literal["external_evidence_retirement_v0"] = SCHEMA_RETIREMENT
    admission_id: Digest
    decision: Decision
    ready: StrictBool
    state: Literal["retired", "retained"]
    reasons: tuple[str, ...]
    admitted_source_refs: tuple[str, ...]
    read_back_source_refs: tuple[str, ...]
    missing_source_refs: tuple[str, ...]


class ReadbackSource(_Frozen):
    """The compact downstream view of one source: no bodies, no raw metadata."""

    source_ref: str
    url: str | None = None
    source_family: str
    basis: str
    finding: str
    limitation: str
    publication_date: str | None
    accessed_at: str
    content_digest: str
    #: ``None`` without an admission.
    admitted: bool | None = None
    #: ``None`` without a ledger project.
    in_ledger: bool | None = None


class LedgerCoverage(_Frozen):
    """What the research ledger holds for one admission in one project."""

    project: str
    question_matches: bool
    executed: bool
    written_source_refs: tuple[str, ...] = ()
    present_source_refs: tuple[str, ...] = ()
    missing_source_refs: tuple[str, ...] = ()
    write_blockers: tuple[str, ...] = ()
    #: ``complete``: every admitted source is there with matching lineage;
    #: ``partial_retained``: some are; ``empty``: none are (or nothing was admitted).
    state: Literal["complete", "partial_retained", "empty"]


class Readback(_Frozen):
    """The one projection every renderer (JSON, Markdown) shows."""

    schema_version: Literal["external_evidence_readback_v0"] = SCHEMA_READBACK
    plan_id: str
    request_id: str
    objective: str
    user_activity: str
    decision: str
    evidence_kinds: tuple[str, ...]
    provider_id: str
    provider_kind: str
    receipt_digest: str
    receipt_status: str
    summary: str
    limitations: tuple[str, ...]
    completed_at: str
    sources: tuple[ReadbackSource, ...]
    admission_id: str | None = None
    admission_decision: str | None = None
    admission_reason: str | None = None
    decided_by: str | None = None
    ledger: LedgerCoverage | None = None
    retirement: Retirement | None = None


# -- parsing -------------------------------------------------------------------------------

_M = TypeVar("_M", bound=BaseModel)


#: The reasons this module's own rules raise (everything else pydantic reports is a
#: generic shape problem and becomes the record's ``invalid_*`` reason).
RULE_REASONS = frozenset(
    {
        "empty_text",
        "invalid_ref",
        "invalid_digest",
        "invalid_timestamp",
        "invalid_date",
        "ready_without_lifecycle",
        "ready_without_probe",
        "ready_with_reason",
        "missing_unavailable_reason",
        "sources_on_empty_receipt",
        "succeeded_without_sources",
        "duplicate_source_ref",
        "accessed_after_completion",
        "unknown_source",
        "nothing_admitted",
        "rejected_with_admitted_sources",
        "source_decisions_mismatch",
        "float_in_hashed_record",
        "integer_out_of_range",
        "lone_surrogate",
    }
)


def contract_error(exc: ValidationError, default: str) -> ContractRejected:
    """A ``ContractRejected`` naming the first broken rule (or ``default``)."""
    kind = str(exc.errors()[0]["type"])
    return ContractRejected(kind if kind in RULE_REASONS else default, format_validation_error(exc))


def parse_model(model: type[_M], data: Mapping[str, Any] | Any, default_reason: str) -> _M:
    """Validate JSON-shaped ``data`` as ``model``; failures are ``ContractRejected``.

    JSON arrays are accepted where the model has tuples (strict mode would refuse lists).
    """
    try:
        return model.model_validate(_tuples(data))
    except ValidationError as exc:
        raise contract_error(exc, default_reason) from None


def _tuples(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_tuples(item) for item in value)
    if isinstance(value, dict):
        return {key: _envelope_safe(key, item) for key, item in value.items()}
    return value


def _envelope_safe(key: str, value: Any) -> Any:
    # The plan's envelope is free JSON: keep its lists as lists so it hashes as given.
    return value if key == "envelope" else _tuples(value)
