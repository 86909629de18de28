"""The typed, frozen models each stage hands to the next.

planner → ``ExternalQueryPlan``; gateway → ``GatherResult`` (``AdapterAttempt`` and
``Evidence``); verifier → ``VerifierResult``; presenter input → ``ExternalContextPacket``;
service output → ``ExternalAnswer``. Models forbid unknown fields so that nothing
(an internal snapshot, a project manifest) can ride along unnoticed.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .audit import AuditTrace

__all__ = [
    "CORE_QUERY_KINDS",
    "STRUCTURED_FACT_KINDS",
    "AdapterAttempt",
    "AdapterCapability",
    "AdmissionSummary",
    "AnswerContract",
    "AnswerStatus",
    "AttemptStatus",
    "CheckResult",
    "DisplaySource",
    "Evidence",
    "EvidenceBasis",
    "EvidenceDecision",
    "ExternalAnswer",
    "ExternalContextPacket",
    "ExternalQueryPlan",
    "Fact",
    "Finding",
    "GatherResult",
    "PlaceCandidate",
    "PlannerSource",
    "ProviderType",
    "QuerySemantics",
    "RankedAdapter",
    "Readiness",
    "TimeRange",
    "VerifierResult",
]

AnswerContract = Literal["direct_fact", "summary_with_sources", "compare_with_sources"]
ProviderType = Literal["fact_api", "live_search", "doc_search"]
PlannerSource = Literal["structured", "upstream_semantics", "fallback", "follow_up"]
AttemptStatus = Literal["ok", "empty", "failed", "timeout", "skipped"]
EvidenceBasis = Literal["page_body", "search_snippet", "fact_api"]
AnswerStatus = Literal["answered", "insufficient_evidence", "clarify"]

CORE_QUERY_KINDS: tuple[str, ...] = (
    "weather",
    "exchange_rate",
    "stock_quote",
    "news",
    "generic_web",
    "documentation",
)
#: Kinds whose answer is one structured fact a fact API can state directly.
STRUCTURED_FACT_KINDS: frozenset[str] = frozenset({"weather", "exchange_rate", "stock_quote"})


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def _clean_strings(values: tuple[str, ...]) -> tuple[str, ...]:
    """Strip, drop empties and duplicates, keep first-seen order."""
    seen: dict[str, None] = {}
    for value in values:
        text = value.strip()
        if text:
            seen.setdefault(text, None)
    return tuple(seen)


class TimeRange(_Model):
    """An inclusive range of calendar dates (the place's local dates for fact APIs)."""

    start: date
    end: date

    @model_validator(mode="after")
    def _ordered(self) -> TimeRange:
        if self.end < self.start:
            raise ValueError(f"time_range end {self.end} is before start {self.start}")
        return self

    def covers(self, day: date) -> bool:
        return self.start <= day <= self.end

    @property
    def days(self) -> int:
        return (self.end - self.start).days + 1


class QuerySemantics(_Model):
    """What the host's route gateway already knows about the question. All optional."""

    query_kind: str | None = None
    answer_contract: AnswerContract | None = None
    location: str | None = None
    entities: tuple[str, ...] = ()
    compare_targets: tuple[str, ...] = ()
    time_range: TimeRange | None = None
    freshness_required: bool | None = None
    language: str | None = None
    search_queries: tuple[str, ...] = ()

    _clean = field_validator("entities", "compare_targets", "search_queries")(_clean_strings)

    @field_validator("query_kind", "location", "language")
    @classmethod
    def _blank_is_none(cls, value: str | None) -> str | None:
        if value is None:
            return None
        return value.strip() or None


class ExternalQueryPlan(_Model):
    """A structured plan for gathering evidence. Built from structured fields only."""

    question: str = Field(min_length=1)
    query_kind: str = "generic_web"
    answer_contract: AnswerContract = "summary_with_sources"
    search_queries: tuple[str, ...] = Field(min_length=1)
    entities: tuple[str, ...] = ()
    compare_targets: tuple[str, ...] = ()
    location: str | None = None
    time_range: TimeRange | None = None
    freshness_required: bool = False
    language: str = "zh"
    planner_source: PlannerSource = "fallback"

    _clean = field_validator("entities", "compare_targets", "search_queries")(_clean_strings)

    @property
    def targets(self) -> tuple[str, ...]:
        """Everything evidence must be about: compare targets, entities and the location."""
        extra = (self.location,) if self.location else ()
        return _clean_strings(self.compare_targets + self.entities + extra)


class AdapterCapability(_Model):
    """What an adapter declares it can do. Ranking reads only these fields."""

    adapter_id: str
    kind: str
    provider_type: ProviderType
    #: Query kinds served; empty means every kind.
    supported_query_kinds: tuple[str, ...] = ()
    supports_freshness: bool = False
    supports_page_fetch: bool = False

    def supports(self, query_kind: str) -> bool:
        return not self.supported_query_kinds or query_kind in self.supported_query_kinds


class Readiness(_Model):
    ready: bool
    reason: str | None = None


class RankedAdapter(_Model):
    """One adapter's place in the ranking, with the rule that put it there."""

    adapter_id: str
    provider_type: ProviderType
    rank: int | None  # None: not tried for this plan
    reason: str


class AdapterAttempt(_Model):
    adapter_id: str
    provider_type: ProviderType
    status: AttemptStatus
    reason: str | None = None
    rank: int | None = None
    results: int = 0  # hits the provider returned
    pages_fetched: int = 0
    pages_failed: int = 0
    evidence_count: int = 0
    duration_ms: int = 0


class Fact(_Model):
    """A measured value from a fact API, as a decimal string (never a float)."""

    name: str
    value: str
    unit: str = ""


class Evidence(_Model):
    """One piece of external evidence and where it came from."""

    evidence_id: str
    adapter_id: str
    provider_type: ProviderType
    basis: EvidenceBasis
    url: str
    title: str = ""
    site: str
    snippet: str
    #: Relevance in integer basis points (0–10000).
    score: int = Field(ge=0, le=10_000)
    published_at: date | None = None
    about_dates: tuple[date, ...] = ()
    accessed_at: datetime
    content_digest: str
    raw_digest: str
    #: Where the snippet sits in the stored normalised text: ``text[offset:offset+length]``.
    ref: str | None = None
    offset: int = 0
    length: int = 0
    #: The plan target or query this evidence was gathered for, if any.
    gathered_for: str | None = None
    #: Names the provider itself gave the subject (a geocoder's localised name).
    aliases: tuple[str, ...] = ()
    facts: tuple[Fact, ...] = ()


class PlaceCandidate(_Model):
    name: str
    admin1: str = ""
    country: str = ""
    country_code: str = ""
    latitude: str
    longitude: str
    timezone: str = ""
    #: As the provider reports it; lets the verifier tell a city from a village of the same name.
    population: int | None = None

    @property
    def label(self) -> str:
        return "，".join(part for part in (self.name, self.admin1, self.country) if part)


class Finding(_Model):
    """Something an adapter noticed that the verifier must judge (it never decides itself)."""

    adapter_id: str
    kind: Literal["place_candidates", "missing_slot"]
    slot: str
    candidates: tuple[PlaceCandidate, ...] = ()


class GatherResult(_Model):
    plan: ExternalQueryPlan
    ranking: tuple[RankedAdapter, ...]
    attempts: tuple[AdapterAttempt, ...]
    evidence: tuple[Evidence, ...]
    findings: tuple[Finding, ...] = ()


class CheckResult(_Model):
    check: Literal["origin", "target", "time", "sources", "coverage", "slots", "candidates"]
    passed: bool
    reason: str
    detail: str = ""
    evidence_id: str | None = None


class EvidenceDecision(_Model):
    evidence_id: str
    decision: Literal["admit", "reject"]
    reason: str


class VerifierResult(_Model):
    status: AnswerStatus
    #: Why not answered (``all_providers_failed``, ``out_of_time_range`` ...); None when answered.
    reason: str | None = None
    checks: tuple[CheckResult, ...] = ()
    accepted: tuple[EvidenceDecision, ...] = ()
    rejected: tuple[EvidenceDecision, ...] = ()
    missing_targets: tuple[str, ...] = ()
    missing_slots: tuple[str, ...] = ()
    clarify_options: tuple[str, ...] = ()

    @property
    def retryable(self) -> bool:
        return self.reason == "all_providers_failed"


class ExternalContextPacket(_Model):
    """The presenter's only input. Exactly these six fields; anything else is refused."""

    question: str
    plan: ExternalQueryPlan
    adapter_attempts: tuple[AdapterAttempt, ...]
    verified_evidence: tuple[Evidence, ...]
    verifier: VerifierResult
    uncertainties: tuple[str, ...] = ()


class DisplaySource(_Model):
    """What a reader sees of a source: display fields only, no adapter ids or raw metadata."""

    site: str
    title: str
    url: str
    published_at: date | None = None
    accessed_at: datetime


class AdmissionSummary(_Model):
    """How the answer is bound to the evidence admission contract (``admission/``)."""

    request_id: str
    #: One evidence plan per adapter attempt that was made (``sha256:`` content ids).
    plan_ids: tuple[str, ...]
    receipt_digests: tuple[str, ...]
    admission_ids: tuple[str, ...]
    #: Admitted evidence may retire once every admitted source was read back in the answer.
    retirement_ready: bool
    retirement_reasons: tuple[str, ...] = ()
    #: Written to the configured ledger (False without one, or when writing failed).
    persisted: bool = False


class ExternalAnswer(_Model):
    status: AnswerStatus
    reason: str | None = None
    route_mode: Literal["external"] = "external"
    answer_contract: AnswerContract
    text: str
    sources: tuple[DisplaySource, ...]
    plan: ExternalQueryPlan
    attempts: tuple[AdapterAttempt, ...]
    evidence: tuple[Evidence, ...]
    verifier: VerifierResult
    uncertainties: tuple[str, ...]
    admission: AdmissionSummary
    audit: AuditTrace

    @property
    def retryable(self) -> bool:
        return self.verifier.retryable
