"""The typed, frozen models each stage hands to the next.

planner → ``ExternalQueryPlan``; gateway → ``GatherResult`` (``AdapterAttempt`` and
``Evidence``); verifier → ``VerifierResult``; presenter input → ``ExternalContextPacket``;
service output → ``ExternalAnswer``. Models forbid unknown fields so that nothing
(an internal snapshot, a project manifest) can ride along unnoticed.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any, Literal

from pydantic import Field, JsonValue, field_validator, model_validator

from ._audit import AuditTrace, StageEvent
from ._bundle import bundle_secret, make_bundle
from ._frozen import Frozen
from .settings import Settings
from .text._language import is_language_tag

__all__ = [
    "CORE_QUERY_KINDS",
    "REASONS",
    "STRUCTURED_FACT_KINDS",
    "AdapterAttempt",
    "AdapterCapability",
    "AdapterOutcome",
    "AdmissionSummary",
    "AnswerContract",
    "AnswerStatus",
    "Answerability",
    "AnsweringQuote",
    "AskedValue",
    "AttemptCause",
    "AttemptStatus",
    "CheckResult",
    "CopyGroup",
    "DisplaySource",
    "Evidence",
    "EvidenceBasis",
    "EvidenceDecision",
    "Exclusion",
    "ExternalAnswer",
    "ExternalContextPacket",
    "ExternalQueryPlan",
    "Fact",
    "FailureClass",
    "Finding",
    "GatherResult",
    "OutcomeReason",
    "PageCause",
    "PlaceCandidate",
    "PlannerResult",
    "PlannerSource",
    "Presentation",
    "ProviderType",
    "QuerySemantics",
    "RankedAdapter",
    "Readiness",
    "Renderer",
    "SentenceCheck",
    "SentenceVerdict",
    "TimeRange",
    "ValueConflict",
    "VerifierOutcome",
    "VerifierResult",
]

AnswerContract = Literal["direct_fact", "summary_with_sources", "compare_with_sources"]
#: What the question asks for, when the plan says so beyond what its kind implies:
#: ``event_date`` is the date of the one event the question asks about (when something was
#: or will be released, launched, held, made landfall). Unset, the value asked is what the
#: kind implies (a temperature, a rate, a provider's named fact) or nothing in particular.
AskedValue = Literal["event_date"]
ProviderType = Literal["fact_api", "live_search", "doc_search"]
PlannerSource = Literal["structured", "upstream_semantics", "fallback", "follow_up"]
AttemptStatus = Literal["ok", "empty", "failed", "timeout", "skipped"]
#: What an evidence's text is: ``page_body`` (main text of a page this service read),
#: ``search_snippet`` (a search result's snippet; the page could not be read), ``fact_api``
#: (a value a fact API stated), ``doc_body`` (text a documentation server handed over as a
#: document, under a ``docs://`` reference), ``provider_text`` (page text as a search
#: provider extracted it; this service did not read the page itself).
EvidenceBasis = Literal["page_body", "search_snippet", "fact_api", "doc_body", "provider_text"]
AnswerStatus = Literal["answered", "insufficient_evidence", "clarify"]
#: Who wrote the answer text: our templates (``extractive``) or a configured model (``llm``).
Renderer = Literal["extractive", "llm"]
#: How a provider failed: ``transient`` (a timeout, a 5xx, a refused connection, every search
#: engine unresponsive: trying again may work), ``misconfigured`` (the provider refused the
#: request as made: a 4xx, JSON output disabled, a missing or refused key), ``network`` (the
#: provider's name did not resolve: this machine may be offline).
FailureClass = Literal["transient", "misconfigured", "network"]
#: Why an answer is not ``answered``. See ``REASONS`` for what each means to a caller.
OutcomeReason = Literal[
    "no_ready_provider",
    "all_providers_failed",
    "provider_misconfigured",
    "network_unavailable",
    "overloaded",
    "filtered_out",
    "no_matching_evidence",
    "out_of_time_range",
    "undated_evidence",
    "target_mismatch",
    "insufficient_sources",
    "missing_slot",
    "ambiguous_target",
    "conflicting_evidence",
]
#: Each reason and whether the same question may succeed if asked again unchanged.
REASONS: dict[str, bool] = {
    "no_ready_provider": False,
    "all_providers_failed": True,
    "provider_misconfigured": False,
    "network_unavailable": True,
    "overloaded": True,
    "filtered_out": False,
    "no_matching_evidence": False,
    "out_of_time_range": False,
    "undated_evidence": False,
    "target_mismatch": False,
    "insufficient_sources": False,
    "missing_slot": False,
    "ambiguous_target": False,
    "conflicting_evidence": False,
}

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


def _clean_strings(values: tuple[str, ...]) -> tuple[str, ...]:
    """Strip, drop empties and duplicates, keep first-seen order."""
    seen: dict[str, None] = {}
    for value in values:
        text = value.strip()
        if text:
            seen.setdefault(text, None)
    return tuple(seen)


class TimeRange(Frozen):
    """An inclusive range of calendar dates (the place's local dates for fact APIs)."""

    start: date
    end: date

    @model_validator(mode="after")
    def _ordered(self) -> TimeRange:
        if self.end < self.start:
            raise ValueError(f"time_range end {self.end} is before start {self.start}")
        return self

    def covers(self, day: date) -> bool:
        """True when ``day`` is inside the range (both ends included)."""
        return self.start <= day <= self.end

    @property
    def days(self) -> int:
        """How many calendar days the range spans."""
        return (self.end - self.start).days + 1


class QuerySemantics(Frozen):
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
    asked_value: AskedValue | None = None

    _clean = field_validator("entities", "compare_targets", "search_queries")(_clean_strings)

    @field_validator("query_kind", "location", "language")
    @classmethod
    def _blank_is_none(cls, value: str | None) -> str | None:
        if value is None:
            return None
        return value.strip() or None

    @field_validator("language")
    @classmethod
    def _language_tag(cls, value: str | None) -> str | None:
        if value is not None and not is_language_tag(value):
            raise ValueError(f"not a BCP 47 language tag (such as zh, zh-TW, en): {value!r}")
        return value


class ExternalQueryPlan(Frozen):
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
    #: What the question asks for beyond its kind (``AskedValue``); None, the conservative
    #: default, compares only the value the kind implies.
    asked_value: AskedValue | None = None
    planner_source: PlannerSource = "fallback"

    _clean = field_validator("entities", "compare_targets", "search_queries")(_clean_strings)

    @property
    def targets(self) -> tuple[str, ...]:
        """Everything evidence must be about: compare targets, entities and the location."""
        extra = (self.location,) if self.location else ()
        return _clean_strings(self.compare_targets + self.entities + extra)


class AdapterCapability(Frozen):
    """What an adapter declares it can do. Ranking reads only these fields."""

    adapter_id: str
    kind: str
    provider_type: ProviderType
    #: Query kinds served; empty means every kind.
    supported_query_kinds: tuple[str, ...] = ()
    supports_freshness: bool = False
    supports_page_fetch: bool = False

    def supports(self, query_kind: str) -> bool:
        """True when the adapter serves ``query_kind`` (an empty declaration serves every kind)."""
        return not self.supported_query_kinds or query_kind in self.supported_query_kinds


class Readiness(Frozen):
    """Whether an adapter can take a question now; ``reason`` says why not (``disabled``,
    ``root_missing``, ``probe_timeout`` …)."""

    ready: bool
    reason: str | None = None


#: Why ranking left an adapter out: it was not ready, or it does not serve the plan's kind.
Exclusion = Literal["not_ready", "kind_not_served"]


class RankedAdapter(Frozen):
    """One adapter's place in the ranking, with the rule that put it there.

    ``rank`` is 1, 2, … for adapters to try in order; ``None`` for those left out, whose
    ``excluded`` says why (and ``readiness_reason`` the adapter's own word when not ready).
    ``reason`` is the rule in words, for the audit.
    """

    adapter_id: str
    provider_type: ProviderType
    rank: int | None
    reason: str
    excluded: Exclusion | None = None
    readiness_reason: str | None = None

    @model_validator(mode="after")
    def _excluded_iff_unranked(self) -> RankedAdapter:
        if (self.rank is None) != (self.excluded is not None):
            raise ValueError("an adapter is either ranked or excluded, with a reason")
        return self


#: Why every page an attempt reached failed, when they all failed for one cause:
#: ``address_policy`` (the URL or the address it resolved to is refused by the network
#: policy) or ``resolve_failed`` (the page's host name did not resolve).
PageCause = Literal["address_policy", "resolve_failed"]


class AttemptCause(Frozen):
    """What an answer's sentence names about an attempt that gathered nothing, beyond its
    reason code, so a reader knows what happened and what to change. Every field is a
    code or a configuration name, never provider text."""

    #: The HTTP status the provider answered with.
    status: int | None = None
    #: What that status, or the adapter's readiness failure, means for this provider, as a
    #: code the answer templates turn into a sentence (``json_output_disabled``,
    #: ``wrong_base_url_path``, ``key_refused``, ``parameter_refused``, ``api_key_missing``,
    #: ``base_url_missing``, ``not_recorded``).
    meaning: str | None = None
    #: The setting or environment variable to change (``BRAVE_API_KEY``, ``base_url``,
    #: ``[network] allowed_networks``).
    setting: str | None = None
    #: When every page the attempt reached failed for one cause: that cause.
    pages: PageCause | None = None
    #: The hosts of those pages, first-seen order.
    hosts: tuple[str, ...] = ()
    #: For ``not_recorded``: the request (``METHOD /path?query``) a replayed world holds no
    #: recording for.
    request: str | None = None


class AdapterAttempt(Frozen):
    """One adapter's try at a question (or why it was skipped): the gateway's record."""

    adapter_id: str
    provider_type: ProviderType
    status: AttemptStatus
    reason: str | None = None
    rank: int | None = None
    results: int = 0  # hits the provider returned
    pages_fetched: int = 0
    pages_failed: int = 0
    #: Bytes of page bodies this attempt received from the network (Content-Encoding
    #: undone), pages it could not use included; replies replayed from the response cache
    #: count nothing. A fetch shared with an identical one in flight counts for each.
    bytes_fetched: int = 0
    evidence_count: int = 0
    duration_ms: int = 0
    #: For a failed or timed-out attempt: what kind of failure it was.
    failure: FailureClass | None = None
    #: The host the provider was reached at (its configured endpoint, with the port when
    #: the URL names one), for the reader.
    source: str | None = None
    #: For an attempt that gathered nothing: what the answer names beyond ``reason``.
    cause: AttemptCause | None = None


class Fact(Frozen):
    """A measured value from a fact API, as a decimal string (never a float)."""

    name: str
    value: str
    unit: str = ""


#: What the schema says of the fields that carry a source's own text: a client showing them
#: escapes them itself (the answer text does; these fields keep what the source sent).
_RAW_OUTSIDE_TEXT = (
    "Raw outside text, as the source gave it: may hold markup, links or script text. "
    "Escape it before rendering it as HTML or Markdown."
)


class Evidence(Frozen):
    """One piece of external evidence and where it came from."""

    evidence_id: str
    adapter_id: str
    provider_type: ProviderType
    basis: EvidenceBasis
    url: str = Field(description=_RAW_OUTSIDE_TEXT)
    title: str = Field(default="", description=_RAW_OUTSIDE_TEXT)
    site: str
    snippet: str = Field(description=_RAW_OUTSIDE_TEXT)
    #: Relevance in integer basis points (0–10000).
    score: int = Field(ge=0, le=10_000)
    published_at: date | None = None
    about_dates: tuple[date, ...] = ()
    accessed_at: datetime
    content_digest: str
    raw_digest: str
    #: Where the snippet sits in the stored normalized text: ``text[offset:offset+length]``.
    ref: str | None = None
    offset: int = 0
    length: int = 0
    #: The plan target or query this evidence was gathered for, if any.
    gathered_for: str | None = None
    #: Names the provider itself gave the subject (a geocoder's localised name).
    aliases: tuple[str, ...] = ()
    facts: tuple[Fact, ...] = ()
    #: ``"browser"`` when the text is the page as a headless browser showed it (its scripts
    #: ran), not the body as fetched; None otherwise.
    rendered_by: Literal["browser"] | None = None
    #: The URL the page was asked for (a search result's), when redirects led elsewhere:
    #: ``url`` is where the body came from. None when they are the same.
    requested_url: str | None = Field(default=None, description=_RAW_OUTSIDE_TEXT)


class PlaceCandidate(Frozen):
    """A place a geocoder offered for a name: where it is, its time zone and its population."""

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
        """The candidate as a reader sees it: name, province, country."""
        return "，".join(part for part in (self.name, self.admin1, self.country) if part)


class Finding(Frozen):
    """Something an adapter noticed that the verifier must judge (it never decides itself)."""

    adapter_id: str
    kind: Literal["place_candidates", "missing_slot"]
    slot: str
    candidates: tuple[PlaceCandidate, ...] = ()


class AdapterOutcome(Frozen):
    """What one adapter's ``gather`` produced. ``failed`` carries a reason code; ``detail``
    holds extra facts for the audit (pages tried, provider notes)."""

    status: Literal["ok", "empty", "failed"]
    reason: str | None = None
    #: For ``failed``: what kind of failure (``transient`` when not said).
    failure: FailureClass | None = None
    evidence: tuple[Evidence, ...] = ()
    findings: tuple[Finding, ...] = ()
    results: int = 0
    pages_fetched: int = 0
    pages_failed: int = 0
    #: Page body bytes received from the network (``AdapterAttempt.bytes_fetched``).
    bytes_fetched: int = 0
    detail: dict[str, JsonValue] = Field(default_factory=dict)
    #: For ``failed``, or ``empty`` because every page failed: what the answer names.
    cause: AttemptCause | None = None


class PlannerResult(Frozen):
    """The planner's stage result: the plan, and why a structured planner was not used
    (``None`` when it was, or when none was configured and nothing failed)."""

    plan: ExternalQueryPlan
    fallback_reason: str | None = None

    def audit_events(self, *, follows: ExternalQueryPlan | None = None) -> tuple[StageEvent, ...]:
        """The planner's audit record: the plan, where it came from, and the question it
        continues (``follows``, for a follow-up)."""
        detail: dict[str, JsonValue] = {
            "source": self.plan.planner_source,
            "fallback_reason": self.fallback_reason,
            "follows": follows.question if follows else None,
            "plan": self.plan.model_dump(mode="json"),
        }
        return (StageEvent("planner", "plan", detail),)


class GatherResult(Frozen):
    """The gateway's stage result: the ranking, every attempt, and everything gathered
    (unjudged: the verifier decides what is admitted)."""

    plan: ExternalQueryPlan
    ranking: tuple[RankedAdapter, ...]
    attempts: tuple[AdapterAttempt, ...]
    gathered: tuple[Evidence, ...]
    findings: tuple[Finding, ...] = ()


class CheckResult(Frozen):
    """One verifier check: which, passed or not, its reason code, a readable detail, and the
    evidence it was about (None for a bundle check)."""

    check: Literal[
        "origin",
        "target",
        "time",
        "sources",
        "coverage",
        "slots",
        "candidates",
        "values",
        "copies",
        "parts",
    ]
    passed: bool
    reason: str
    detail: str = ""
    evidence_id: str | None = None


class EvidenceDecision(Frozen):
    """The verifier's decision on one evidence; ``reason`` names the first failed check."""

    evidence_id: str
    decision: Literal["admit", "reject"]
    reason: str


class ValueConflict(Frozen):
    """Two admitted evidence about the same target and time that state different values for
    what is asked (``kind`` is always ``conflicting_values``). ``subject`` names the value
    (``temperature``, ``exchange_rate``, ``event_date``, a provider's fact name);
    ``values`` are as a reader writes them (``24 °C``, ``2024-07-25``), in the order of
    ``evidence_ids``. ``majority`` says whether one value is held by more than half of the
    independent sources."""

    kind: Literal["conflicting_values"] = "conflicting_values"
    subject: str
    target: str | None = None
    evidence_ids: tuple[str, str]
    values: tuple[str, str]
    majority: bool = False
    #: Every evidence holding the second value (its best-ranked one is ``evidence_ids[1]``).
    dissenting: tuple[str, ...] = ()


class CopyGroup(Frozen):
    """Near-duplicate admitted evidence (one article on several sites): ``original`` (the
    earliest published, else the first ranked) counts as a source, ``copies`` do not."""

    original: str
    copies: tuple[str, ...]
    #: The lowest word-shingle Jaccard similarity between a copy and the original (0–1).
    similarity: float = Field(ge=0, le=1)


class VerifierResult(Frozen):
    """The verdict: the outcome, why not answered, every check, and the per-evidence
    decisions. ``accepted`` holds only ``admit`` decisions and ``rejected`` only ``reject``
    ones, never for the same evidence: what is admitted is decided here, once."""

    status: AnswerStatus
    #: Why not answered (``all_providers_failed``, ``out_of_time_range`` ...); None when answered.
    reason: OutcomeReason | None = None
    #: Whether asking again unchanged may succeed; always ``REASONS[reason]``.
    retryable: bool = False
    checks: tuple[CheckResult, ...] = ()
    accepted: tuple[EvidenceDecision, ...] = ()
    rejected: tuple[EvidenceDecision, ...] = ()
    missing_targets: tuple[str, ...] = ()
    missing_slots: tuple[str, ...] = ()
    clarify_options: tuple[str, ...] = ()
    #: Admitted evidence that disagree on the value asked (``conflicting_values``).
    conflicts: tuple[ValueConflict, ...] = ()
    #: Admitted evidence merged as copies of one original (counted once).
    copies: tuple[CopyGroup, ...] = ()
    #: Parts of a question asked in parts that no admitted evidence covers, as written.
    missing_parts: tuple[str, ...] = ()

    @model_validator(mode="before")
    @classmethod
    def _retryable_from_reason(cls, data: Any) -> Any:
        if isinstance(data, dict) and "retryable" not in data:
            data = {**data, "retryable": REASONS.get(str(data.get("reason")), False)}
        return data

    @model_validator(mode="after")
    def _decisions_agree(self) -> VerifierResult:
        if self.retryable != REASONS.get(str(self.reason), False):
            raise ValueError(f"retryable must be {not self.retryable} for reason {self.reason}")
        if any(item.decision != "admit" for item in self.accepted):
            raise ValueError("accepted holds a decision that is not 'admit'")
        if any(item.decision != "reject" for item in self.rejected):
            raise ValueError("rejected holds a decision that is not 'reject'")
        both = {item.evidence_id for item in self.accepted} & {
            item.evidence_id for item in self.rejected
        }
        if both:
            raise ValueError(f"evidence both admitted and rejected: {sorted(both)[0]}")
        return self

    def refused(self, reason: OutcomeReason) -> VerifierResult:
        """This verdict turned into ``insufficient_evidence`` for ``reason``, its checks and
        decisions kept (a model proved that no admitted evidence answers)."""
        return self.model_copy(
            update={
                "status": "insufficient_evidence",
                "reason": reason,
                "retryable": REASONS.get(reason, False),
            }
        )

    @property
    def admitted_ids(self) -> frozenset[str]:
        """The ids of the evidence this verdict admitted."""
        return frozenset(item.evidence_id for item in self.accepted)


class VerifierOutcome(Frozen):
    """The verifier's stage result: the verdict, the admitted evidence (input order) and
    short notes for the reader."""

    result: VerifierResult
    admitted: tuple[Evidence, ...]
    uncertainties: tuple[str, ...]

    def refused(self, reason: OutcomeReason) -> VerifierOutcome:
        """This outcome with its verdict turned into ``insufficient_evidence`` for
        ``reason`` (``VerifierResult.refused``)."""
        return self.model_copy(update={"result": self.result.refused(reason)})

    def audit_events(self) -> tuple[StageEvent, ...]:
        """The verifier's audit record: every check, then the outcome."""
        result = self.result
        checks = [
            StageEvent("verifier", "check", check.model_dump(mode="json"))
            for check in result.checks
        ]
        outcome: dict[str, JsonValue] = {
            "status": result.status,
            "reason": result.reason,
            "admitted": [item.evidence_id for item in result.accepted],
            "rejected": {item.evidence_id: item.reason for item in result.rejected},
            "missing_targets": list(result.missing_targets),
            "conflicts": [conflict.model_dump(mode="json") for conflict in result.conflicts],
            "copies": [group.model_dump(mode="json") for group in result.copies],
        }
        return (*checks, StageEvent("verifier", "outcome", outcome))


class ExternalContextPacket(Frozen):
    """The presenter's only input. Exactly these six fields; anything else is refused.

    ``verified_evidence`` may hold only evidence the verifier admitted (its ids are in
    ``verifier.accepted``): the presenter quotes, cites and lists exactly this evidence.
    """

    question: str
    plan: ExternalQueryPlan
    adapter_attempts: tuple[AdapterAttempt, ...]
    verified_evidence: tuple[Evidence, ...]
    verifier: VerifierResult
    uncertainties: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _only_admitted_evidence(self) -> ExternalContextPacket:
        admitted = self.verifier.admitted_ids
        stray = next(
            (item for item in self.verified_evidence if item.evidence_id not in admitted), None
        )
        if stray is not None:
            raise ValueError(f"evidence {stray.evidence_id!r} was not admitted by the verifier")
        return self


class DisplaySource(Frozen):
    """What a reader sees of a source: display fields only, no adapter ids or raw metadata."""

    site: str
    title: str
    url: str
    published_at: date | None = None
    accessed_at: datetime


#: A sentence of a model-written answer, as its check found it: ``grounded`` (every claim
#: occurs in the cited evidence), ``not_a_statement`` (a heading or list label), or the
#: check it failed.
SentenceVerdict = Literal[
    "grounded",
    "not_a_statement",
    "uncited_statement",
    "invented_number",
    "unit_mismatch",
    "wrong_date",
    "unquoted_span",
]


class SentenceCheck(Frozen):
    """One sentence of a model-written answer and its verdict (audited)."""

    sentence: str
    citations: tuple[str, ...] = ()
    verdict: SentenceVerdict
    detail: str = ""


class AnsweringQuote(Frozen):
    """A passage a model says answers the question: its evidence id and the answering words,
    quoted verbatim from its text."""

    evidence_id: str = Field(max_length=200)
    quote: str = Field(min_length=1, max_length=400)


class Answerability(Frozen):
    """A model's judgment of whether the admitted evidence answers the question, as checked
    in code (audited): ``answered`` (every passage it named holds its quote),
    ``none_answers`` (it named none: the answer becomes ``insufficient_evidence`` /
    ``no_matching_evidence``), or ``unproven`` (a passage it named is not admitted evidence
    or does not hold its quote, or the answer cites none of them: the claim is ignored and
    the extractive answer stands)."""

    verdict: Literal["answered", "none_answers", "unproven"]
    passages: tuple[AnsweringQuote, ...] = ()
    #: Why: the check that failed, or the model's own words when it says none answers.
    detail: str = ""


class Presentation(Frozen):
    """The presenter's stage result: the answer text and what produced it."""

    text: str
    sources: tuple[DisplaySource, ...]
    template: str
    #: The LLM prompt template; ``""`` for the refusal templates.
    prompt_template: str
    #: ``sha256:<hex>`` of the rendered prompt; ``""`` when none was rendered.
    prompt_digest: str
    renderer: Renderer
    #: Why a configured model's answer was not used (for the audit); None otherwise.
    fallback_reason: str | None = None
    #: The model-written answer's sentences and their verdicts (empty when no model wrote).
    sentences: tuple[SentenceCheck, ...] = ()
    #: A model's judgment of whether the evidence answers (None when it gave none).
    answerability: Answerability | None = None

    @property
    def refusal(self) -> OutcomeReason | None:
        """``no_matching_evidence`` when a model judged that no admitted evidence answers
        (the answer's verdict is then refused for it); None otherwise."""
        judged = self.answerability
        if judged is not None and judged.verdict == "none_answers":
            return "no_matching_evidence"
        return None

    def audit_events(self) -> tuple[StageEvent, ...]:
        """The presenter's audit record: a model's refusal (``none_answers``), if any, then
        the render."""
        events: list[StageEvent] = []
        refusal, judged = self.refusal, self.answerability
        if refusal is not None and judged is not None:
            events.append(
                StageEvent(
                    "presenter",
                    "none_answers",
                    {
                        "status": "insufficient_evidence",
                        "reason": refusal,
                        "detail": judged.detail,
                    },
                )
            )
        render: dict[str, JsonValue] = {
            "template": self.template,
            "prompt_template": self.prompt_template,
            "prompt_digest": self.prompt_digest,
            "renderer": self.renderer,
            "fallback_reason": self.fallback_reason,
            "sources": len(self.sources),
            "sentences": [sentence.model_dump(mode="json") for sentence in self.sentences],
            "answerability": judged.model_dump(mode="json") if judged else None,
        }
        events.append(StageEvent("presenter", "render", render))
        return tuple(events)


class AdmissionSummary(Frozen):
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


class ExternalAnswer(Frozen):
    """What ``answer()`` returns: the outcome, the text, its sources, and everything that
    explains it (plan, attempts, admitted evidence, the verdict, admission ids, the audit).

    ``retryable`` says whether asking again unchanged may succeed (see ``REASONS``).
    """

    status: AnswerStatus
    reason: OutcomeReason | None = None
    retryable: bool = False
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

    @model_validator(mode="after")
    def _agrees_with_the_verdict(self) -> ExternalAnswer:
        verdict = (self.verifier.status, self.verifier.reason, self.verifier.retryable)
        if (self.status, self.reason, self.retryable) != verdict:
            raise ValueError("status, reason and retryable must be the verifier's")
        return self

    def bundle(self, *, settings: Settings | None = None) -> str:
        """This answer as a portable bundle (JSON text that ``verify_bundle`` and
        ``external-query verify`` read unchanged; ``docs/architecture/bundles.md``), signed
        when ``settings`` name a ``[bundle] signing_key_env``."""
        key = bundle_secret(settings.bundle.signing_key_env) if settings is not None else None
        return make_bundle(self.model_dump(mode="json"), signing_key=key)
