"""The public entry point: ``ExternalQueryService`` and its follow-up ``Session``.

plan → gather → verify → packet → present, each stage a typed model, all of it audited.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from types import TracebackType
from typing import Any, Self

from pydantic import ValidationError

from ._portal import Portal
from .adapters.base import Adapter, AdapterRuntime, ToolObserver
from .admission.chain import ChainRecord, bind_answer, service_envelope
from .audit import AuditLog
from .clock import Clock, system_clock
from .errors import InvalidQuery, ServiceClosed
from .gateway.gateway import ExternalQueryGateway
from .gateway.registry import adapter_class
from .ledger import Ledger, LedgerError
from .llm import ChatCompletionsClient, LLMAnswerPresenter, LLMPlanner
from .models import (
    CORE_QUERY_KINDS,
    AdmissionSummary,
    ExternalAnswer,
    ExternalContextPacket,
    ExternalQueryPlan,
    QuerySemantics,
    Readiness,
)
from .net.fetch import HttpRuntime
from .planner import ExternalQueryPlanner, PlannerResult, StructuredPlanner
from .presenter import ExternalAnswerPresenter
from .settings import Settings, format_validation_error
from .store import EvidenceStore
from .verifier import EvidenceVerifier

__all__ = ["MAX_QUESTION_CHARS", "ExternalQueryService", "Session"]

#: The longest question ``answer()`` takes, in characters (after stripping white space).
MAX_QUESTION_CHARS = 20_000

SemanticsInput = QuerySemantics | Mapping[str, Any] | None


def coerce_semantics(value: SemanticsInput) -> QuerySemantics | None:
    """Validate host-provided semantics; bad input is an ``InvalidQuery`` with one line."""
    if value is None or isinstance(value, QuerySemantics):
        return value
    if not isinstance(value, Mapping):
        raise InvalidQuery(
            f"query_semantics must be an object, not {type(value).__name__}",
            reason="invalid_semantics",
        )
    try:
        return QuerySemantics.model_validate(dict(value))
    except ValidationError as exc:
        raise InvalidQuery(
            f"query_semantics: {format_validation_error(exc)}", reason="invalid_semantics"
        ) from None


class ExternalQueryService:
    """Answers questions only from external evidence.

    ``settings`` says which adapters exist (none by default); ``clock`` is the "now" for
    every time check; ``planner`` is an optional structured planner hook; ``store`` keeps
    the text of every page read; ``http`` replaces the network runtime (it must offer
    ``fetcher``, ``endpoint(base_url)`` and ``aclose()``); ``tool_observer`` is told of every
    call an adapter makes to a tool server outside HTTP (a recording keeps them).
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        clock: Clock | None = None,
        planner: StructuredPlanner | None = None,
        store: EvidenceStore | None = None,
        http: HttpRuntime | None = None,
        tool_observer: ToolObserver | None = None,
    ) -> None:
        self.settings = settings or Settings()
        self.clock = clock or system_clock
        self.store = store if store is not None else EvidenceStore()
        # ``http`` lets a caller wrap network access (recording a fixture world, say).
        self._http = http if http is not None else HttpRuntime(self.settings.network)
        runtime = AdapterRuntime(
            network=self.settings.network,
            fetcher=self._http.fetcher,
            endpoint=self._http.endpoint,
            store=self.store,
            clock=self.clock,
            sources=self.settings.sources,
            tool_observer=tool_observer,
        )
        adapters: list[Adapter] = [
            adapter_class(config.kind)(config, runtime) for config in self.settings.adapters
        ]
        self.gateway = ExternalQueryGateway(
            adapters, deadline_s=self.settings.network.deadline_s, needs=self.settings.verifier
        )
        # One model client, injected into planner and presenter; neither builds its own.
        self.llm = ChatCompletionsClient(self.settings.llm) if self.settings.llm else None
        kinds = (*CORE_QUERY_KINDS, *(k for a in adapters for k in a.supported_query_kinds))
        #: Every query kind a question may name: the core kinds and the configured adapters'.
        self.query_kinds: tuple[str, ...] = tuple(dict.fromkeys(kinds))
        if planner is None and self.llm is not None:  # an explicit hook still wins
            planner = LLMPlanner(self.llm, kinds=self.query_kinds, clock=self.clock)
        self.planner = ExternalQueryPlanner(planner)
        self.verifier = EvidenceVerifier(self.settings)
        self.presenter = ExternalAnswerPresenter(language=self.settings.presenter.language)
        self._llm_presenter = (
            LLMAnswerPresenter(self.llm, extractive=self.presenter) if self.llm else None
        )
        self._envelope = service_envelope(self.settings)
        self._ledger = (
            Ledger(self.settings.ledger.path, clock=self.clock)
            if self.settings.ledger.path is not None
            else None
        )
        self._portal = Portal()
        self._closed = False

    # -- answering ----------------------------------------------------------------------
    async def aanswer(
        self, question: str, query_semantics: SemanticsInput = None
    ) -> ExternalAnswer:
        self._check_open()
        question = _check_question(question)
        planned = await self.planner.plan(question, self._semantics(query_semantics))
        return await self._run(question, planned)

    def answer(self, question: str, query_semantics: SemanticsInput = None) -> ExternalAnswer:
        """Synchronous ``aanswer``; safe to call from inside a running event loop."""
        self._check_open()
        return self._portal.call(self.aanswer(question, query_semantics))

    async def _follow_up(
        self, question: str, previous: ExternalQueryPlan, query_semantics: SemanticsInput
    ) -> ExternalAnswer:
        self._check_open()
        question = _check_question(question)
        planned = self.planner.plan_follow_up(question, previous, self._semantics(query_semantics))
        return await self._run(question, planned, follows=previous)

    def _semantics(self, value: SemanticsInput) -> QuerySemantics | None:
        semantics = coerce_semantics(value)
        kind = semantics.query_kind if semantics else None
        if kind is not None and kind not in self.query_kinds:
            raise InvalidQuery(
                f"unknown query kind {kind!r}; known kinds: {', '.join(self.query_kinds)}",
                reason="unknown_query_kind",
            )
        return semantics

    async def _run(
        self, question: str, planned: PlannerResult, *, follows: ExternalQueryPlan | None = None
    ) -> ExternalAnswer:
        audit = AuditLog()
        audit.record("service", "question", question=question, route_mode="external")
        plan = planned.plan
        audit.record(
            "planner",
            "plan",
            source=plan.planner_source,
            fallback_reason=planned.fallback_reason,
            follows=follows.question if follows else None,
            plan=plan.model_dump(mode="json"),
        )
        gathered = await self.gateway.gather(plan, audit)
        outcome = self.verifier.verify(gathered, now=self.clock())
        result = outcome.result
        for check in result.checks:
            audit.record("verifier", "check", **check.model_dump(mode="json"))
        audit.record(
            "verifier",
            "outcome",
            status=result.status,
            reason=result.reason,
            admitted=[item.evidence_id for item in result.accepted],
            rejected={item.evidence_id: item.reason for item in result.rejected},
            missing_targets=list(result.missing_targets),
        )
        packet = ExternalContextPacket(
            question=question,
            plan=plan,
            adapter_attempts=gathered.attempts,
            verified_evidence=outcome.admitted,
            verifier=result,
            uncertainties=outcome.uncertainties,
        )
        if self._llm_presenter is not None:
            shown = await self._llm_presenter.present(packet)
        else:
            shown = self.presenter.present(packet)
        audit.record(
            "presenter",
            "render",
            template=shown.template,
            prompt_template=shown.prompt_template,
            prompt_digest=shown.prompt_digest,
            renderer=shown.renderer,
            fallback_reason=shown.fallback_reason,
            sources=len(shown.sources),
        )
        chain = bind_answer(
            question=question,
            plan=plan,
            gathered=gathered,
            verifier=result,
            envelope=self._envelope,
            presented_urls=[source.url for source in shown.sources],
            decided_at=self.clock(),
        )
        persisted = await self._persist(chain, audit)
        audit.record("service", "admission", persisted=persisted, **chain.audit_detail())
        return ExternalAnswer(
            status=result.status,
            reason=result.reason,
            retryable=result.retryable,
            answer_contract=plan.answer_contract,
            text=shown.text,
            sources=shown.sources,
            plan=plan,
            attempts=gathered.attempts,
            evidence=outcome.admitted,
            verifier=result,
            uncertainties=outcome.uncertainties,
            admission=AdmissionSummary(
                request_id=chain.request.request_id,
                plan_ids=chain.plan_ids,
                receipt_digests=chain.receipt_digests,
                admission_ids=chain.admission_ids,
                retirement_ready=chain.retirement.ready,
                retirement_reasons=chain.retirement.reasons,
                persisted=persisted,
            ),
            audit=audit.freeze(),
        )

    async def _persist(self, chain: ChainRecord, audit: AuditLog) -> bool:
        """Write the chain to the ledger when one is configured; a ledger fault is audited,
        never allowed to lose the answer."""
        if self._ledger is None:
            return False
        try:
            await asyncio.to_thread(self._ledger.persist_chain, chain)
        except LedgerError as exc:
            audit.record("service", "ledger_error", reason=exc.reason, detail=str(exc))
            return False
        return True

    # -- sessions and discovery -----------------------------------------------------------
    def session(self) -> Session:
        """A conversation whose follow-ups continue verifying on the external chain."""
        return Session(self)

    async def aprobe(self) -> dict[str, Readiness]:
        """Each adapter's real, bounded readiness probe."""
        self._check_open()
        return await self.gateway.probe()

    def probe(self) -> dict[str, Readiness]:
        self._check_open()
        return self._portal.call(self.aprobe())

    # -- lifecycle ----------------------------------------------------------------------
    def close(self) -> None:
        """Close HTTP clients, stop what adapters started (tool server processes), and end
        the private loop. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._portal.running:
            self._portal.call(self._release())
        self._portal.stop()
        if self._ledger is not None:
            self._ledger.close()

    async def aclose(self) -> None:
        """Close this loop's HTTP clients, then everything else."""
        if self._closed:
            return
        await self._release()
        self.close()

    async def _release(self) -> None:
        """Everything held on the running loop: adapters' processes, then HTTP clients."""
        for adapter in self.gateway.adapters.values():
            await adapter.aclose()
        await self._http.aclose()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def _check_open(self) -> None:
        if self._closed:
            raise ServiceClosed()


class Session:
    """Keeps the last plan so a follow-up re-plans from it (``route_mode`` stays external)."""

    def __init__(self, service: ExternalQueryService) -> None:
        self._service = service
        self.history: list[ExternalAnswer] = []

    @property
    def last_plan(self) -> ExternalQueryPlan | None:
        return self.history[-1].plan if self.history else None

    async def aask(self, question: str, query_semantics: SemanticsInput = None) -> ExternalAnswer:
        answer = await self._service.aanswer(question, query_semantics)
        self.history.append(answer)
        return answer

    def ask(self, question: str, query_semantics: SemanticsInput = None) -> ExternalAnswer:
        return self._service._portal.call(self.aask(question, query_semantics))

    async def afollow_up(
        self, question: str, query_semantics: SemanticsInput = None
    ) -> ExternalAnswer:
        previous = self.last_plan
        if previous is None:
            return await self.aask(question, query_semantics)
        answer = await self._service._follow_up(question, previous, query_semantics)
        self.history.append(answer)
        return answer

    def follow_up(self, question: str, query_semantics: SemanticsInput = None) -> ExternalAnswer:
        return self._service._portal.call(self.afollow_up(question, query_semantics))


def _check_question(question: str) -> str:
    if not isinstance(question, str):
        raise InvalidQuery(
            f"the question must be text, not {type(question).__name__}", reason="invalid_question"
        )
    text = question.strip()
    if not text:
        raise InvalidQuery("the question is empty", reason="empty_question")
    if len(text) > MAX_QUESTION_CHARS:
        raise InvalidQuery(
            f"the question is {len(text):,} characters long; the limit is {MAX_QUESTION_CHARS:,}",
            reason="question_too_long",
        )
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: no digest or ledger record can hold it
        raise InvalidQuery(
            "the question holds characters that are not valid Unicode text",
            reason="invalid_question",
        ) from None
    return text
