"""The evidence verifier: judges evidence, never meaning, and never re-routes the question.

Per evidence, in this order (each yields one ``CheckResult`` with ``evidence_id`` set):

1. ``origin`` — http/https; deny/allow lists and the IP-literal policy for URLs from outside
   (a ``fact_api`` evidence comes from a configured endpoint and skips them);
2. ``target`` — found in the title, snippet or provider aliases (``gathered_for`` proves
   nothing): the location, when planned; then, for a compare plan, at least one of the compare
   targets the evidence was gathered for (those its ``gathered_for`` names, else any), and it
   covers only those it names; for an exchange-rate plan, both currencies of the pair
   (``text._currencies.currency_pair``; a currency is named by any of its unambiguous CLDR
   names, so 美元, US$ and USD all name USD); otherwise at least one entity;
3. ``time`` — see ``timecheck``.

An evidence is admitted only when all three pass; its decision names the first failing reason.

The outcome, first rule that applies wins:

1. ``clarify / missing_slot`` — the plan lacks a slot its kind needs (``plan_missing_slots``:
   a weather plan without a place, an exchange-rate plan without a currency pair), or an
   adapter reported one. Whatever adapter answered — a page search finds some city's weather
   for a weather question without a place — nothing useful can be answered before the user
   fills it.
2. ``clarify / ambiguous_target`` — an adapter's place candidates that match the plan's name
   fall in two or more (country, admin1) groups. This wins even when evidence was gathered for
   the top candidate: answering for one of two same-named places would be a guess.
3. ``insufficient_evidence`` when nothing was admitted, with the first matching reason:
   ``no_ready_provider`` (no evidence; no adapter ranked, or every attempt skipped);
   when every attempt made failed or timed out: ``network_unavailable`` (every failure a name
   that did not resolve — retryable), ``provider_misconfigured`` (no transient failure and at
   least one provider refused the request as made — not retryable), else
   ``all_providers_failed`` (retryable);
   when results were found but no page could be read, all for one cause (``AttemptCause``):
   ``filtered_out`` (the address policy refused every page) or ``network_unavailable``
   (no page's host name resolved);
   ``no_matching_evidence`` (no evidence otherwise: attempts came back empty),
   ``filtered_out`` (every evidence failed the origin check),
   ``undated_evidence`` (some evidence passed origin and target, and every such evidence
   has no date a time range can be checked against),
   ``out_of_time_range`` (some evidence passed origin and target, so time rejected it),
   ``target_mismatch`` (every evidence passed origin but none is about the plan's targets),
   ``no_matching_evidence`` (otherwise: target mismatches mixed with origin failures).
4. ``insufficient_evidence / insufficient_sources`` — too few distinct sites among admitted
   evidence for the answer contract, or a compare target not covered by enough sites.
   How many a plan needs is one rule the gateway reads too (``_needs.sources_needed``).
   Near-duplicate evidence (``copies``: one article on several sites) counts once: only
   the original's site counts; two texts alike but for the value asked are not copies.
5. ``insufficient_evidence / conflicting_evidence`` — a ``direct_fact`` plan whose admitted
   evidence disagree on the value asked (``conflicts``) with no value held by a clear
   majority of independent sources. Every disagreement is recorded (``conflicting_values``
   in ``VerifierResult.conflicts``, a ``values`` check, a note for the reader), whatever
   the contract: summaries and comparisons answer and show both sides.
6. ``answered``.

A question asked in parts (``text._parts``) also gets a ``parts`` check naming the parts no
admitted evidence covers (``missing_parts``); it never changes the outcome: the parts
covered are answered, and the answer says which part is missing.

Pure: no I/O and no clock — ``now`` is passed in.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Literal

from .._lazy import renamed
from ..models import (
    AdapterAttempt,
    AnswerStatus,
    CheckResult,
    CopyGroup,
    Evidence,
    EvidenceDecision,
    ExternalQueryPlan,
    Finding,
    GatherResult,
    OutcomeReason,
    PageCause,
    PlaceCandidate,
    ValueConflict,
    VerifierOutcome,
    VerifierResult,
)
from ..net._sites import check_origin, registrable_domain, url_host
from ..settings import Settings
from ..text._currencies import currency_aliases, currency_code, currency_pair, iso_codes
from ..text._language import AnswerLanguage, answer_language
from ..text._parts import covers, question_parts
from ..text._targets import MATCH_THRESHOLD, best_match, matches_target, normalize_for_match
from ..text._tokens import terms
from ._conflicts import value_conflicts
from ._copies import copy_groups
from ._needs import SourcesNeeded, sources_needed
from ._notes import ReaderNote, render_note
from ._timecheck import check_time, local_date
from ._values import differ_in_value

__all__ = [
    "PLAUSIBLE_POPULATION_SHARE",
    "Verifier",
    "VerifierOutcome",
    "plan_missing_slots",
]


@dataclass(frozen=True, slots=True)
class _Judged:
    """One evidence with its origin, target and time checks."""

    evidence: Evidence
    origin: CheckResult
    target: CheckResult
    time: CheckResult
    matched_compare_targets: tuple[str, ...]
    note: ReaderNote | None

    @property
    def checks(self) -> tuple[CheckResult, CheckResult, CheckResult]:
        return (self.origin, self.target, self.time)

    @property
    def admitted(self) -> bool:
        return all(check.passed for check in self.checks)

    def decision(self) -> EvidenceDecision:
        failed = next((check for check in self.checks if not check.passed), None)
        return EvidenceDecision(
            evidence_id=self.evidence.evidence_id,
            decision="reject" if failed else "admit",
            reason=failed.reason if failed else "ok",
        )


@dataclass(frozen=True, slots=True)
class _Sources:
    checks: tuple[CheckResult, ...]
    missing_targets: tuple[str, ...]
    enough: bool


class Verifier:
    """Judges a ``GatherResult``. Reads ``settings.sources``, ``.verifier`` and ``.network``."""

    def __init__(self, settings: Settings) -> None:
        self._sources = settings.sources
        self._limits = settings.verifier
        self._network = settings.network
        self._language = settings.presenter.language

    def verify(self, gathered: GatherResult, *, now: datetime) -> VerifierOutcome:
        """Judge every evidence, then the bundle. ``now`` must carry a UTC offset."""
        today = local_date(now)
        plan = gathered.plan
        judged = tuple(self._judge(evidence, plan, today) for evidence in gathered.gathered)
        admitted = tuple(item for item in judged if item.admitted)
        slot_check, missing_slots = _slot_check(plan, gathered.findings)
        candidate_checks, clarify_options = _candidate_checks(gathered.findings, plan)
        copies = copy_groups(
            _ranked(item.evidence for item in admitted),
            apart=lambda one, other: differ_in_value(plan.question, one, other),
        )
        copied = {copy for group in copies for copy in group.copies}
        counted = tuple(item for item in admitted if item.evidence.evidence_id not in copied)
        sources = self._source_checks(plan, counted)
        conflicts = value_conflicts(
            plan,
            [(item.evidence, item.matched_compare_targets) for item in _ranked_judged(counted)],
        )
        parts_check, missing_parts = _parts_check(plan, admitted)
        undecided = plan.answer_contract == "direct_fact" and any(
            not conflict.majority for conflict in conflicts
        )

        status: AnswerStatus
        reason: OutcomeReason | None
        if missing_slots:
            status, reason = "clarify", "missing_slot"
        elif clarify_options:
            status, reason = "clarify", "ambiguous_target"
        elif not admitted:
            status, reason = "insufficient_evidence", _why_nothing_admitted(gathered, judged)
        elif not sources.enough:
            status, reason = "insufficient_evidence", "insufficient_sources"
        elif undecided:
            status, reason = "insufficient_evidence", "conflicting_evidence"
        else:
            status, reason = "answered", None

        checks = [check for item in judged for check in item.checks]
        checks += [slot_check, *candidate_checks, *sources.checks]
        checks += [_copy_check(group) for group in copies]
        checks += [_conflict_check(conflict, decisive=undecided) for conflict in conflicts]
        checks += [parts_check] if parts_check is not None else []
        decisions = [item.decision() for item in judged]
        result = VerifierResult(
            status=status,
            reason=reason,
            checks=tuple(checks),
            accepted=tuple(d for d in decisions if d.decision == "admit"),
            rejected=tuple(d for d in decisions if d.decision == "reject"),
            missing_targets=sources.missing_targets,
            missing_slots=missing_slots,
            clarify_options=clarify_options,
            conflicts=conflicts,
            copies=copies,
            missing_parts=missing_parts,
        )
        language = answer_language(plan.language, self._language)
        notes = _uncertainties(admitted, language)
        if conflicts:
            notes = (*notes, render_note(ReaderNote("conflicting_values"), language))
        return VerifierOutcome(
            result=result,
            admitted=tuple(item.evidence for item in admitted),
            uncertainties=notes,
        )

    # -- per evidence -------------------------------------------------------------------------

    def _judge(self, evidence: Evidence, plan: ExternalQueryPlan, today: date) -> _Judged:
        eid = evidence.evidence_id
        origin = check_origin(
            evidence.url,
            provider_type=evidence.provider_type,
            sources=self._sources,
            network=self._network,
        )
        target, matched = _target_check(evidence, plan)
        verdict = check_time(evidence, plan, today=today, max_age_days=self._limits.max_age_days)
        return _Judged(
            evidence=evidence,
            origin=CheckResult(
                check="origin",
                passed=origin == "ok",
                reason=origin,
                detail=url_host(evidence.url),
                evidence_id=eid,
            ),
            target=target,
            time=CheckResult(
                check="time",
                passed=verdict.passed,
                reason=verdict.reason,
                detail=verdict.detail,
                evidence_id=eid,
            ),
            matched_compare_targets=matched,
            note=verdict.note,
        )

    # -- bundle -------------------------------------------------------------------------------

    def _source_checks(self, plan: ExternalQueryPlan, admitted: Sequence[_Judged]) -> _Sources:
        needed = sources_needed(plan, self._limits)
        if needed.targets:
            return _coverage_checks(needed, admitted)
        sites = _sites(item.evidence for item in admitted)
        check = _count_check("sources", sites, needed.sites)
        return _Sources(checks=(check,), missing_targets=(), enough=check.passed)


def _coverage_checks(needed: SourcesNeeded, admitted: Sequence[_Judged]) -> _Sources:
    targets = needed.targets
    checks: list[CheckResult] = []
    missing: list[str] = []
    for target in targets:
        covering = (item.evidence for item in admitted if target in item.matched_compare_targets)
        check = _count_check("coverage", _sites(covering), needed.sites, target=target)
        checks.append(check)
        if not check.passed:
            missing.append(target)
    summary = CheckResult(
        check="sources",
        passed=not missing,
        reason="insufficient_sources" if missing else "ok",
        detail=f"{len(targets) - len(missing)} of {len(targets)} compare targets covered",
    )
    return _Sources(checks=(*checks, summary), missing_targets=tuple(missing), enough=not missing)


def _target_check(
    evidence: Evidence, plan: ExternalQueryPlan
) -> tuple[CheckResult, tuple[str, ...]]:
    """Target consistency; also returns the compare targets this evidence covers."""
    texts = (evidence.title, evidence.snippet, *evidence.aliases)
    problems: list[str] = []
    notes: list[str] = []
    if plan.location:
        score = best_match(plan.location, texts)
        (notes if score >= MATCH_THRESHOLD else problems).append(
            f"location {plan.location}: {score}"
        )
    # Compare targets first, else an exchange-rate plan's currency pair, else any entity.
    matched: tuple[str, ...] = ()
    pair = _currency_pair(plan)
    if plan.compare_targets:
        matched, named, detail = _compare_targets_named(evidence, plan, texts)
        (notes if named else problems).append(detail)
    elif pair is not None:
        named, detail = _pair_named(pair, texts)
        (notes if named else problems).append(detail)
    elif plan.entities:
        scores = {entity: _best(entity, plan, texts) for entity in plan.entities}
        found = [entity for entity, score in scores.items() if score >= MATCH_THRESHOLD]
        if found:
            notes.append(_matched(found, scores))
        else:
            problems.append(_none_of(plan.entities, scores))
    check = CheckResult(
        check="target",
        passed=not problems,
        reason="target_mismatch" if problems else "ok",
        detail="; ".join(problems or notes) or "no targets in plan",
        evidence_id=evidence.evidence_id,
    )
    return check, matched


def _currency_pair(plan: ExternalQueryPlan) -> tuple[str, str] | None:
    """An exchange-rate plan's (base, quote): the rule the rate adapter picks its pair by,
    with CLDR's codes standing in for the provider's list."""
    if plan.query_kind != "exchange_rate":
        return None
    return currency_pair(plan.entities, iso_codes())


def _names(target: str, plan: ExternalQueryPlan) -> tuple[str, ...]:
    """What counts as naming ``target``: in an exchange-rate plan a currency goes by every
    unambiguous CLDR name (``USD``: 美元, US$ …); anything else only by itself."""
    code = currency_code(target) if plan.query_kind == "exchange_rate" else None
    return currency_aliases(code) if code else (target,)


def _best(target: str, plan: ExternalQueryPlan, texts: Sequence[str]) -> int:
    """The best score of any of ``target``'s names over ``texts``."""
    return max(best_match(name, texts) for name in _names(target, plan))


def _named_as(names: Sequence[str], texts: Sequence[str]) -> str | None:
    """The first of ``names`` some text names, if any."""
    return next((name for name in names if best_match(name, texts) >= MATCH_THRESHOLD), None)


def _pair_named(pair: tuple[str, str], texts: Sequence[str]) -> tuple[bool, str]:
    """Both currencies must be named: a page about HKD/CNY names CNY but is not about USD/CNY."""
    found = {code: _named_as(currency_aliases(code), texts) for code in pair}
    named = [f"{code} ({name})" if name != code else code for code, name in found.items() if name]
    missing = [code for code, name in found.items() if not name]
    if not missing:
        return True, "names " + ", ".join(named)
    if not named:
        return False, f"names neither {pair[0]} nor {pair[1]}"
    return False, f"names {named[0]} but not {missing[0]}"


def _compare_targets_named(
    evidence: Evidence, plan: ExternalQueryPlan, texts: Sequence[str]
) -> tuple[tuple[str, ...], bool, str]:
    """The compare targets this evidence covers, whether it covers any, and the detail.

    An evidence gathered for particular targets (its ``gathered_for`` names some, say a
    per-target search query) must name one of those in its own text and covers only those;
    otherwise any target it names counts. ``gathered_for`` never proves a target by itself.
    """
    targets = plan.compare_targets
    gathered_for = evidence.gathered_for or ""
    sought = tuple(t for t in targets if _best(t, plan, (gathered_for,)) >= MATCH_THRESHOLD)
    wanted = sought or targets
    scores = {target: _best(target, plan, texts) for target in wanted}
    matched = tuple(target for target, score in scores.items() if score >= MATCH_THRESHOLD)
    if matched:
        return matched, True, _matched(matched, scores)
    missing = _none_of(wanted, scores)
    if sought and sought != targets:
        missing = f"gathered for {', '.join(sought)} but {missing}"
    return (), False, missing


def _matched(found: Iterable[str], scores: dict[str, int]) -> str:
    return "matched " + ", ".join(f"{target}: {scores[target]}" for target in found)


def _none_of(targets: Sequence[str], scores: dict[str, int]) -> str:
    return f"none of {', '.join(targets)} (best {max(scores.values())})"


def plan_missing_slots(plan: ExternalQueryPlan) -> tuple[str, ...]:
    """The slots ``plan``'s query kind needs and it lacks: ``location`` for ``weather`` (a
    compare of places names them as its targets instead), ``currency_pair`` for
    ``exchange_rate`` (two distinct ISO 4217 codes among the entities, the rule the rate
    adapter picks its pair by)."""
    if plan.query_kind == "weather" and not plan.location and not plan.compare_targets:
        return ("location",)
    if plan.query_kind == "exchange_rate" and _currency_pair(plan) is None:
        return ("currency_pair",)
    return ()


def _slot_check(
    plan: ExternalQueryPlan, findings: Iterable[Finding]
) -> tuple[CheckResult, tuple[str, ...]]:
    reported = (f.slot for f in findings if f.kind == "missing_slot")
    slots = tuple(dict.fromkeys([*plan_missing_slots(plan), *reported]))
    check = CheckResult(
        check="slots",
        passed=not slots,
        reason="missing_slot" if slots else "ok",
        detail=", ".join(slots),
    )
    return check, slots


def _candidate_checks(
    findings: Iterable[Finding], plan: ExternalQueryPlan
) -> tuple[tuple[CheckResult, ...], tuple[str, ...]]:
    """One check per place-candidates finding; the labels to offer when any is ambiguous."""
    # The plan's location names the place; a plan without one (a compare of two places) is
    # matched against all its targets instead.
    names = (plan.location,) if plan.location else plan.targets
    checks: list[CheckResult] = []
    options: list[str] = []
    for finding in findings:
        if finding.kind != "place_candidates":
            continue
        groups = _plausible_groups(finding.candidates, names)
        ambiguous = len(groups) >= 2
        if ambiguous:
            options.extend(candidate.label for candidate in groups)
        checks.append(
            CheckResult(
                check="candidates",
                passed=not ambiguous,
                reason="ambiguous_target" if ambiguous else "ok",
                detail=f"{finding.slot}: {len(groups)} distinct places match",
            )
        )
    return tuple(checks), tuple(dict.fromkeys(options))


#: A same-named place counts as an equally plausible reading only when its population is at
#: least this share of the largest matching place's (a city and a village of the same name
#: are not a real ambiguity; two cities are).
PLAUSIBLE_POPULATION_SHARE = 0.1


def _plausible_groups(
    candidates: Iterable[PlaceCandidate], names: Sequence[str]
) -> tuple[PlaceCandidate, ...]:
    """The first candidate of each (country, admin1) group whose name matches a plan name.

    When the provider reports populations, candidates far smaller than the largest match are
    dropped first; without populations every matching candidate counts.
    """
    matching = [
        candidate
        for candidate in candidates
        if any(matches_target(name, candidate.name) >= MATCH_THRESHOLD for name in names)
    ]
    largest = max((c.population for c in matching if c.population is not None), default=None)
    groups: dict[tuple[str, str], PlaceCandidate] = {}
    for candidate in matching:
        if largest and (candidate.population or 0) < largest * PLAUSIBLE_POPULATION_SHARE:
            continue
        key = (candidate.country_code.upper(), normalize_for_match(candidate.admin1))
        groups.setdefault(key, candidate)
    return tuple(groups.values())


def _why_nothing_admitted(gathered: GatherResult, judged: Sequence[_Judged]) -> OutcomeReason:
    """The reason code when no evidence was admitted (precedence in the module docstring)."""
    if not judged:
        tried = [a for a in gathered.attempts if a.status != "skipped"]
        nothing_ranked = bool(gathered.ranking) and all(r.rank is None for r in gathered.ranking)
        if not tried or nothing_ranked:
            return "no_ready_provider"
        failed = [a for a in tried if a.status in ("failed", "timeout")]
        if len(failed) == len(tried):
            return _why_providers_failed(failed)
        return _why_pages_failed(tried) or "no_matching_evidence"
    if not any(item.origin.passed for item in judged):
        return "filtered_out"
    on_target = [item for item in judged if item.origin.passed and item.target.passed]
    if on_target:
        # Only time rejected them: undated evidence is not evidence of another time.
        undated = all(item.time.reason == "undated" for item in on_target)
        return "undated_evidence" if undated else "out_of_time_range"
    if all(item.origin.passed for item in judged):
        return "target_mismatch"
    return "no_matching_evidence"


def _why_pages_failed(tried: Sequence[AdapterAttempt]) -> OutcomeReason | None:
    """Searches found results but no page could be read, all for one cause: say that cause.

    Every attempt's pages refused by the address policy: ``filtered_out``. Every page's host
    name unresolved (and any provider that failed, failed to resolve too): the network is
    down, ``network_unavailable``. None when the causes differ or any attempt has none.
    """
    causes = {_page_cause(attempt) for attempt in tried}
    if causes == {"address_policy"}:
        return "filtered_out"
    if causes == {"resolve_failed"}:
        return "network_unavailable"
    return None


def _page_cause(attempt: AdapterAttempt) -> PageCause | None:
    """Why ``attempt`` read no page: its pages' one cause, or for a provider that failed to
    resolve, the same as a page that did not."""
    if attempt.status in ("failed", "timeout"):
        return "resolve_failed" if attempt.failure == "network" else None
    return attempt.cause.pages if attempt.cause is not None else None


def _why_providers_failed(failed: Sequence[AdapterAttempt]) -> OutcomeReason:
    """Every provider tried failed: say whether trying again can help.

    Only names that did not resolve, everywhere: the network is down (retryable). No
    transient failure and at least one provider refusing the request as made: retrying the
    same request cannot help (``provider_misconfigured``). Otherwise ``all_providers_failed``.
    """
    kinds = {attempt.failure or "transient" for attempt in failed}
    if kinds == {"network"}:
        return "network_unavailable"
    if "misconfigured" in kinds and "transient" not in kinds:
        return "provider_misconfigured"
    return "all_providers_failed"


def _ranked(evidence: Iterable[Evidence]) -> list[Evidence]:
    """Best score first; equal scores keep the gathered order (the presenter's order too)."""
    return sorted(evidence, key=lambda item: -item.score)


def _ranked_judged(judged: Iterable[_Judged]) -> list[_Judged]:
    return sorted(judged, key=lambda item: -item.evidence.score)


def _parts_check(
    plan: ExternalQueryPlan, admitted: Sequence[_Judged]
) -> tuple[CheckResult | None, tuple[str, ...]]:
    """For a question asked in parts (``text._parts``; a comparison names its parts as
    compare targets instead): the parts no admitted evidence covers. Informational: the
    answer quotes a passage for each part covered and says which part is missing."""
    parts = () if plan.compare_targets else question_parts(plan.question)
    if not parts:
        return None, ()
    held = [
        frozenset(terms(f"{item.evidence.title}\n{item.evidence.snippet}")) for item in admitted
    ]
    missing = tuple(part.text for part in parts if not any(covers(part, t) for t in held))
    check = CheckResult(
        check="parts",
        passed=not missing,
        reason="missing_parts" if missing else "ok",
        detail=f"{len(parts) - len(missing)} of {len(parts)} parts covered"
        + (f"; missing: {', '.join(missing)}" if missing else ""),
    )
    return check, missing


def _terms(evidence: Evidence) -> frozenset[str]:
    return frozenset(terms(f"{evidence.title}\n{evidence.snippet}"))


def _copy_check(group: CopyGroup) -> CheckResult:
    return CheckResult(
        check="copies",
        passed=True,
        reason="ok",
        detail=f"{', '.join(group.copies)} copy {group.original} "
        f"(similarity {group.similarity}): counted once",
    )


def _conflict_check(conflict: ValueConflict, *, decisive: bool) -> CheckResult:
    (first, second), (one, other) = conflict.evidence_ids, conflict.values
    about = f"{conflict.target}: " if conflict.target else ""
    held = "a majority holds the first" if conflict.majority else "no majority"
    return CheckResult(
        check="values",
        passed=not decisive,
        reason="conflicting_values",
        detail=f"{about}{conflict.subject} {one} ({first}) vs {other} ({second}); {held}",
    )


def _sites(evidence: Iterable[Evidence]) -> tuple[str, ...]:
    """Distinct registrable domains, first-seen order."""
    return tuple(dict.fromkeys(registrable_domain(url_host(item.url)) for item in evidence))


def _count_check(
    check: Literal["sources", "coverage"],
    sites: Sequence[str],
    required: int,
    *,
    target: str | None = None,
) -> CheckResult:
    enough = len(sites) >= required
    prefix = f"{target}: " if target is not None else ""
    return CheckResult(
        check=check,
        passed=enough,
        reason="ok" if enough else "insufficient_sources",
        detail=f"{prefix}{len(sites)} of {required} sites ({', '.join(sites)})",
    )


def _uncertainties(admitted: Iterable[_Judged], language: AnswerLanguage) -> tuple[str, ...]:
    notes: list[ReaderNote] = []
    for item in admitted:
        if item.note:
            notes.append(item.note)
        if item.evidence.basis == "search_snippet":
            notes.append(ReaderNote("snippet_only"))
        elif item.evidence.basis == "provider_text":
            notes.append(ReaderNote("provider_text"))
    return tuple(dict.fromkeys(render_note(note, language) for note in notes))


#: The old class name, kept for one release (a ``DeprecationWarning`` on use).
__getattr__ = renamed(__name__, {"EvidenceVerifier": "Verifier"})
