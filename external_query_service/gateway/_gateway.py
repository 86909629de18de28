"""The gateway: rank ready adapters by capability, try them in order, fail over, and
record every try. It collects evidence; it never judges it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence

from .._audit import AuditLog
from .._lazy import renamed
from ..adapters._base import Adapter
from ..adapters._pages import gather_deadline
from ..errors import AdapterError, FetchError, UpstreamStatus
from ..models import (
    AdapterAttempt,
    AdapterOutcome,
    AttemptCause,
    AttemptStatus,
    Evidence,
    ExternalQueryPlan,
    Finding,
    GatherResult,
    RankedAdapter,
    Readiness,
)
from ..net._failures import failure_class
from ..net._sites import registrable_domain, source_allowed, url_host
from ..observability._tracing import span
from ..settings import SourceSettings, VerifierSettings
from ..text._targets import mentions_target
from ..verifier._needs import sources_needed
from ._ranking import rank_adapters

__all__ = ["Gateway"]

log = logging.getLogger("external_query_service.gateway")


class Gateway:
    """Holds adapters; ``gather(plan)`` runs them within one per-question deadline."""

    def __init__(
        self,
        adapters: Sequence[Adapter],
        *,
        deadline_s: float,
        needs: VerifierSettings | None = None,
    ) -> None:
        self.adapters = {adapter.adapter_id: adapter for adapter in adapters}
        self.deadline_s = deadline_s
        self.needs = needs or VerifierSettings()

    def readiness(self) -> dict[str, Readiness]:
        """Each adapter's cheap, local readiness check (no network)."""
        return {adapter_id: adapter.readiness() for adapter_id, adapter in self.adapters.items()}

    def rank(self, plan: ExternalQueryPlan) -> tuple[RankedAdapter, ...]:
        """The adapters in the order to try them for ``plan`` (a pure function of capabilities and
        readiness)."""
        capabilities = [adapter.capability for adapter in self.adapters.values()]
        return rank_adapters(plan, capabilities, self.readiness())

    async def probe(self) -> dict[str, Readiness]:
        """Run every adapter's real, bounded probe concurrently."""

        async def one(adapter: Adapter) -> Readiness:
            static = adapter.readiness()
            if not static.ready:
                return static
            try:
                return await asyncio.wait_for(adapter.probe(), timeout=self.deadline_s)
            except TimeoutError:
                return Readiness(ready=False, reason="probe_timeout")
            except (FetchError, AdapterError) as exc:
                return Readiness(ready=False, reason=exc.reason)

        adapters = list(self.adapters.values())
        results = await asyncio.gather(*(one(adapter) for adapter in adapters))
        return {
            adapter.adapter_id: result for adapter, result in zip(adapters, results, strict=True)
        }

    def deadline(self) -> float:
        """The event-loop time by which a question starting now must have gathered."""
        return asyncio.get_running_loop().time() + self.deadline_s

    async def gather(
        self, plan: ExternalQueryPlan, audit: AuditLog, *, deadline: float | None = None
    ) -> GatherResult:
        """Try the ranked adapters in order within the question's deadline (``deadline``,
        an event-loop time; ``deadline_s`` from now by default), failing over, and record
        every attempt; evidence is collected, never judged."""
        ranking = self.rank(plan)
        audit.record(
            "gateway",
            "rank",
            ranking=[
                {"adapter": item.adapter_id, "rank": item.rank, "reason": item.reason}
                for item in ranking
            ],
        )
        attempts, evidence, findings = await self._run_round(
            plan, ranking, audit, deadline if deadline is not None else self.deadline()
        )
        return GatherResult(
            plan=plan,
            ranking=ranking,
            attempts=tuple(attempts),
            gathered=tuple(_unique(evidence)),
            findings=tuple(findings),
        )

    async def gather_more(
        self,
        first: GatherResult,
        queries: Sequence[str],
        audit: AuditLog,
        *,
        deadline: float,
    ) -> GatherResult:
        """Round 2: the search adapters (fact APIs answer the same plan the same way) run
        ``queries`` within what is left of the question's ``deadline``, counting the first
        round's evidence toward "enough". Returns the first round's result with this
        round's attempts and evidence added; every event it records carries ``round: 2``."""
        plan = first.plan.model_copy(update={"search_queries": tuple(queries)})
        ranking = tuple(item for item in first.ranking if item.provider_type != "fact_api")
        attempts, evidence, findings = await self._run_round(
            plan, ranking, audit, deadline, prior=first.gathered, round_number=2
        )
        return first.model_copy(
            update={
                "attempts": (*first.attempts, *attempts),
                "gathered": tuple(_unique([*first.gathered, *evidence])),
                "findings": (*first.findings, *findings),
            }
        )

    async def _run_round(
        self,
        plan: ExternalQueryPlan,
        ranking: Sequence[RankedAdapter],
        audit: AuditLog,
        deadline: float,
        *,
        prior: Sequence[Evidence] = (),
        round_number: int = 1,
    ) -> tuple[list[AdapterAttempt], list[Evidence], list[Finding]]:
        attempts: list[AdapterAttempt] = []
        evidence: list[Evidence] = []
        findings: list[Finding] = []
        loop = asyncio.get_running_loop()
        # The first round's events stay as they were; a later round's say which it is.
        tag: dict[str, int] = {"round": round_number} if round_number > 1 else {}

        for item in ranking:
            if item.excluded is not None:
                if item.excluded == "not_ready":
                    cause = AttemptCause(meaning=item.readiness_reason)
                    attempts.append(self._skipped(item, item.reason, cause))
                continue
            if self._enough(plan, [*prior, *evidence]) and (round_number == 1 or evidence):
                attempts.append(self._skipped(item, "enough_evidence"))
                continue
            remaining = deadline - loop.time()
            if remaining <= 0:
                attempts.append(self._skipped(item, "deadline_exceeded"))
                continue
            with span("adapter_attempt", adapter=item.adapter_id, rank=item.rank) as traced:
                attempt, outcome = await self._try(
                    self.adapters[item.adapter_id], item, plan, remaining
                )
                traced.set("status", attempt.status)
                traced.set("reason", attempt.reason)
                traced.set("pages_fetched", attempt.pages_fetched)
            attempts.append(attempt)
            detail = outcome.detail if outcome is not None else {}
            audit.record("gateway", "attempt", **attempt.model_dump(mode="json"), **detail, **tag)
            if outcome is not None:
                evidence.extend(outcome.evidence)
                findings.extend(outcome.findings)

        for attempt in attempts:
            if attempt.status == "skipped":
                audit.record("gateway", "attempt", **attempt.model_dump(mode="json"), **tag)
        return attempts, evidence, findings

    async def _try(
        self, adapter: Adapter, item: RankedAdapter, plan: ExternalQueryPlan, remaining: float
    ) -> tuple[AdapterAttempt, AdapterOutcome | None]:
        started = time.perf_counter()
        # Page fetching reads the deadline so it can stop in time and keep what it read.
        token = gather_deadline.set(asyncio.get_running_loop().time() + remaining)
        source = adapter.source
        try:
            outcome = await asyncio.wait_for(adapter.gather(plan), timeout=remaining)
        except TimeoutError:
            failed = AdapterOutcome(
                status="failed", reason="deadline_exceeded", failure="transient"
            )
            return _attempt(item, started, failed, source, status="timeout"), None
        except FetchError as exc:
            cause = adapter.failure_cause(exc) if isinstance(exc, UpstreamStatus) else None
            failed = AdapterOutcome(
                status="failed", reason=exc.reason, failure=failure_class(exc), cause=cause
            )
            return _attempt(item, started, failed, source), None
        except AdapterError as exc:
            failed = AdapterOutcome(status="failed", reason=exc.reason, failure="transient")
            return _attempt(item, started, failed, source), None
        except Exception as exc:  # an adapter bug must not end the question
            log.exception("adapter %s crashed", item.adapter_id)
            reason = f"internal_error:{type(exc).__name__}"
            failed = AdapterOutcome(status="failed", reason=reason, failure="transient")
            return _attempt(item, started, failed, source), None
        finally:
            gather_deadline.reset(token)
        return _attempt(item, started, outcome, source), outcome

    @staticmethod
    def _skipped(
        item: RankedAdapter, reason: str, cause: AttemptCause | None = None
    ) -> AdapterAttempt:
        return AdapterAttempt(
            adapter_id=item.adapter_id,
            provider_type=item.provider_type,
            status="skipped",
            reason=reason,
            rank=item.rank,
            cause=cause,
        )

    def _enough(self, plan: ExternalQueryPlan, evidence: Sequence[Evidence]) -> bool:
        """A cheap pre-check so failover stops once the contract could be met.

        It counts distinct sites (and compare-target mentions) among evidence the configured
        source lists let through, against what the verifier will ask (``sources_needed``,
        one rule for both); the verifier judges. (A search that found only denied sites is
        as good as empty: the next adapter is still tried.)
        """
        evidence = [item for item in evidence if self._listed_ok(item)]
        if not evidence:
            return False
        needed = sources_needed(plan, self.needs)
        for target in needed.targets:
            sites = {registrable_domain(item.site) for item in evidence if _mentions(target, item)}
            if len(sites) < needed.sites:
                return False
        return len({registrable_domain(item.site) for item in evidence}) >= needed.sites

    def _listed_ok(self, item: Evidence) -> bool:
        if item.provider_type != "live_search":
            return True  # configured endpoints and local documents: the lists do not apply
        adapter = self.adapters.get(item.adapter_id)
        sources = adapter.runtime.sources if adapter is not None else SourceSettings()
        return source_allowed(url_host(item.url), sources)


def _attempt(
    item: RankedAdapter,
    started: float,
    outcome: AdapterOutcome,
    source: str | None,
    *,
    status: AttemptStatus | None = None,
) -> AdapterAttempt:
    """The attempt record of ``outcome``; ``ok`` without evidence reads ``empty``."""
    if status is None:
        status = "empty" if outcome.status == "ok" and not outcome.evidence else outcome.status
    failed = status in ("failed", "timeout")
    return AdapterAttempt(
        adapter_id=item.adapter_id,
        provider_type=item.provider_type,
        status=status,
        reason=outcome.reason,
        rank=item.rank,
        results=outcome.results,
        pages_fetched=outcome.pages_fetched,
        pages_failed=outcome.pages_failed,
        bytes_fetched=outcome.bytes_fetched,
        evidence_count=len(outcome.evidence),
        duration_ms=round((time.perf_counter() - started) * 1000),
        failure=(outcome.failure or "transient") if failed else None,
        source=source,
        cause=outcome.cause if status != "ok" else None,
    )


def _mentions(target: str, item: Evidence) -> bool:
    return mentions_target(target, (item.title, item.snippet, *item.aliases))


def _unique(evidence: Sequence[Evidence]) -> list[Evidence]:
    seen: set[str] = set()
    kept = []
    for item in evidence:
        if item.evidence_id not in seen:
            seen.add(item.evidence_id)
            kept.append(item)
    return kept


#: The old class name, kept for one release (a ``DeprecationWarning`` on use).
__getattr__ = renamed(__name__, {"ExternalQueryGateway": "Gateway"})
