"""The public entry point: ``ExternalQueryService`` and its follow-up ``Session``.

plan → gather → verify → packet → present, each stage a typed model, all of it audited.
This module is that pipeline; the parts it answers with (store, caches, HTTP, analysis pool,
adapters, model, ledger, browser) are built from the settings by ``_wiring``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from ._audit import AuditLog, caller
from ._clock import Clock, system_clock
from ._evidence_store import EvidenceStore
from ._questions import MAX_QUESTION_CHARS, SemanticsInput, check_question, coerce_semantics
from ._session import Session
from ._wiring import WARM_UP_WORKERS_S, build_components
from .adapters._base import ToolObserver
from .adapters._page_walk import RecordedWalks, WalkObserver
from .admission._chain import ChainRecord, bind_answer, service_envelope
from .errors import InvalidQuery, ServiceClosed
from .execution._analysis_pool import AnalysisPool
from .execution._closing import Closing
from .execution._concurrency import QuestionGate
from .execution._portal import Portal
from .gateway._gateway import Gateway
from .gateway._second_round import second_round_event, second_round_queries
from .models import (
    ExternalAnswer,
    ExternalContextPacket,
    ExternalQueryPlan,
    GatherResult,
    Presentation,
    QuerySemantics,
    Readiness,
    VerifierOutcome,
    VerifierResult,
)
from .net._fetch import HttpRuntime
from .observability._events import CacheHits
from .observability._tracing import span
from .planner._structured import Planner, PlannerResult, StructuredPlanner
from .presenter._presenter import Presenter
from .settings import Settings
from .verifier import Verifier

if TYPE_CHECKING:
    from .browser import BrowserProvider
    from .llm import ChatCompletionsClient
    from .storage._redis_cache import SharedCache

__all__ = [
    "MAX_QUESTION_CHARS",
    "WARM_UP_WORKERS_S",
    "ExternalQueryService",
    "Session",
    "coerce_semantics",
]


class ExternalQueryService(Closing):
    """Answers questions only from external evidence.

    ``settings`` says which adapters exist (none by default); ``clock`` is the "now" for
    every time check; ``planner`` is an optional structured planner hook; ``store`` keeps
    the text of every page read; ``http`` replaces the network runtime (it must offer
    ``fetcher``, ``endpoint(base_url)`` and ``aclose()``); ``tool_observer`` is told of every
    call an adapter makes to a tool server outside HTTP (a recording keeps them), and
    ``walk_observer`` of how every page walk ended; ``recorded_walks`` makes the page walks of
    a recorded world's replay end as the recording's did (``adapters/_page_walk.py``).

    One service serves many callers at once: ``[network] max_concurrent_questions`` bounds
    the questions it works on together (``questions`` counts them); the rest wait in line up
    to ``queue_timeout_s``, then end as ``insufficient_evidence`` with the retryable reason
    ``overloaded``, without any planner model, adapter or ledger work.
    """

    settings: Settings
    #: The "now" of every time check.
    clock: Clock
    #: The text of every page read, quoted from by evidence.
    store: EvidenceStore
    #: Cache hits (response cache and page analyses) as they happen; ``subscribe`` to count
    #: them (the server's metrics do).
    cache_hits: CacheHits
    #: The Redis cache ``[cache] url`` names (None: everything in this process's memory).
    shared_cache: SharedCache | None
    #: Where pages are analysed: ``[analysis] processes`` workers, started on first use.
    analysis: AnalysisPool
    gateway: Gateway
    #: Every query kind a question may name: the core kinds and the configured adapters'.
    query_kinds: tuple[str, ...]
    verifier: Verifier
    #: The presenter: extractive, or a configured model's that falls back on it.
    presenter: Presenter
    #: The one model client, shared by planner and presenter (None without ``[llm]``).
    llm: ChatCompletionsClient | None
    planner: Planner
    #: The headless browser (``[browser] mode`` not ``off``); its Chromium starts with the
    #: first page rendered. None with the mode off: nothing browser is ever loaded.
    browser: BrowserProvider | None
    #: The questions worked on now and waiting in line (shared by every event loop).
    questions: QuestionGate

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        clock: Clock | None = None,
        planner: StructuredPlanner | None = None,
        store: EvidenceStore | None = None,
        http: HttpRuntime | None = None,
        tool_observer: ToolObserver | None = None,
        walk_observer: WalkObserver | None = None,
        recorded_walks: RecordedWalks | None = None,
    ) -> None:
        self.settings = settings or Settings()
        self.clock = clock or system_clock
        parts = build_components(
            self.settings,
            clock=self.clock,
            planner=planner,
            store=store,
            http=http,
            tool_observer=tool_observer,
            walk_observer=walk_observer,
            recorded_walks=recorded_walks,
        )
        self._parts = parts
        self.store = parts.store
        self.cache_hits = parts.cache_hits
        self.shared_cache = parts.shared_cache
        self._http = parts.http  # the network runtime (warm-up prepares its page client)
        self.analysis = parts.analysis
        self.gateway = parts.gateway
        self.query_kinds = parts.query_kinds
        self.verifier = parts.verifier
        self.presenter = parts.presenter
        self.llm = parts.llm
        self.planner = parts.planner
        self.browser = parts.browser
        self.questions = QuestionGate(self.settings.network.max_concurrent_questions)
        self._envelope = service_envelope(self.settings)
        self._portal = Portal()
        self._closed = False

    # -- answering ----------------------------------------------------------------------
    async def aanswer(
        self, question: str, query_semantics: SemanticsInput = None
    ) -> ExternalAnswer:
        """Answer ``question`` from external evidence only: plan, gather, verify, present.
        ``query_semantics`` are the host's structured fields (they win over any planner). Raises
        ``InvalidQuery`` for a question or semantics that cannot be planned; every other outcome is
        an ``ExternalAnswer``."""
        self._check_open()
        question = check_question(question)
        semantics = self._semantics(query_semantics)

        async def plan(admitted: bool) -> PlannerResult:
            if not admitted:
                # The structured planner (a model, perhaps) is work to shed: plan from the
                # host's fields only.
                return await Planner().plan(question, semantics)
            with span("planner"):
                return await self.planner.plan(question, semantics)

        return await self._admitted(question, plan)

    def answer(self, question: str, query_semantics: SemanticsInput = None) -> ExternalAnswer:
        """Synchronous ``aanswer``; safe to call from inside a running event loop."""
        self._check_open()
        return self._portal.call(self.aanswer(question, query_semantics))

    async def _follow_up(
        self, question: str, previous: ExternalQueryPlan, query_semantics: SemanticsInput
    ) -> ExternalAnswer:
        self._check_open()
        question = check_question(question)
        with span("planner", follow_up=True):  # structured and cheap: planned before the wait
            planned = self.planner.plan_follow_up(
                question, previous, self._semantics(query_semantics)
            )

        async def plan(_admitted: bool) -> PlannerResult:
            return planned

        return await self._admitted(question, plan, follows=previous)

    async def _admitted(
        self,
        question: str,
        plan: Callable[[bool], Awaitable[PlannerResult]],
        *,
        follows: ExternalQueryPlan | None = None,
    ) -> ExternalAnswer:
        """Answer in one of the question gate's slots. A question that finds none within
        ``queue_timeout_s`` is answered ``overloaded`` at once; ``plan(admitted)`` is its
        plan either way, and must spend no model work when not admitted."""
        started = time.monotonic()
        async with self.questions.enter(self.settings.network.queue_timeout_s) as admitted:
            planned = await plan(admitted)
            if not admitted:
                return await self._overloaded(
                    question, planned.plan, follows=follows, waited_from=started
                )
            with self.store.question():  # its captures stay readable while it is answered
                return await self._run(question, planned, follows=follows)

    def check_question(self, question: str, query_semantics: SemanticsInput = None) -> None:
        """Raise the ``InvalidQuery`` that ``aanswer`` would for this question and these
        semantics, without answering: a server refuses a bad request before it starts a
        stream of events."""
        check_question(question)
        self._semantics(query_semantics)

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
        audit = _started_audit(question, planned, follows)
        plan = planned.plan
        deadline = self.gateway.deadline()
        async with self._question_browser():
            gathered = await self.gateway.gather(plan, audit, deadline=deadline)
            outcome = self._verified(gathered)
            if self.settings.gateway.second_round:
                gathered, outcome = await self._second_round(gathered, outcome, audit, deadline)
        audit.extend(outcome.audit_events())
        packet = _packet(question, gathered, outcome)
        with span("presenter", model=self.presenter.model is not None):
            shown = await self.presenter.apresent(packet)
        if shown.refusal is not None:  # a model proved no admitted evidence answers
            outcome = outcome.refused(shown.refusal)
        return await self._conclude(question, gathered, outcome, shown, audit)

    def _question_browser(self) -> contextlib.AbstractAsyncContextManager[None]:
        """The question's own browser session while its evidence is gathered, when the
        browser is on (``browser.browsing``)."""
        if self.browser is None:
            return contextlib.nullcontext()
        from .browser import browsing

        return browsing(self.browser)

    async def _second_round(
        self,
        gathered: GatherResult,
        outcome: VerifierOutcome,
        audit: AuditLog,
        deadline: float,
    ) -> tuple[GatherResult, VerifierOutcome]:
        """One more bounded search round when the first verdict names something searching
        can fix (``gateway._second_round``), then the verdict again; else both unchanged."""
        first = outcome.result
        queries = second_round_queries(gathered.plan, first)
        if not queries:
            return gathered, outcome
        audit.extend([second_round_event(queries, first)])
        more = await self.gateway.gather_more(gathered, queries, audit, deadline=deadline)
        return more, self._verified(more)

    def _verified(self, gathered: GatherResult) -> VerifierOutcome:
        """The verifier's verdict on ``gathered``, traced as the ``verifier`` span."""
        with span("verifier") as traced:
            outcome = self.verifier.verify(gathered, now=self.clock())
            traced.set("status", outcome.result.status)
            traced.set("reason", outcome.result.reason)
        return outcome

    async def _overloaded(
        self,
        question: str,
        plan: ExternalQueryPlan,
        *,
        waited_from: float,
        follows: ExternalQueryPlan | None = None,
    ) -> ExternalAnswer:
        """The answer to a question that found no free slot in time: a real answer with its
        plan, audit and admission ids, but no adapter, verifier, model or ledger work."""
        audit = _started_audit(
            question, PlannerResult(plan=plan, fallback_reason="overloaded"), follows
        )
        network = self.settings.network
        audit.record(
            "service",
            "overloaded",
            max_concurrent_questions=network.max_concurrent_questions,
            queue_timeout_s=network.queue_timeout_s,
            waited_ms=round((time.monotonic() - waited_from) * 1000),
            waiting=self.questions.waiting,
        )
        gathered = GatherResult(plan=plan, ranking=(), attempts=(), gathered=())
        verdict = VerifierResult(status="insufficient_evidence", reason="overloaded")
        outcome = VerifierOutcome(result=verdict, admitted=(), uncertainties=())
        shown = self.presenter.present(_packet(question, gathered, outcome))
        return await self._conclude(question, gathered, outcome, shown, audit, persist=False)

    async def _conclude(
        self,
        question: str,
        gathered: GatherResult,
        outcome: VerifierOutcome,
        shown: Presentation,
        audit: AuditLog,
        *,
        persist: bool = True,
    ) -> ExternalAnswer:
        """Bind the answer to the admission chain, persist it, and build the answer."""
        plan, result = gathered.plan, outcome.result
        audit.extend(shown.audit_events())
        chain = bind_answer(
            question=question,
            plan=plan,
            gathered=gathered,
            verifier=result,
            envelope=self._envelope,
            presented_urls=[source.url for source in shown.sources],
            decided_at=self.clock(),
        )
        persisted = await self._persist(chain, audit) if persist else False
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
            admission=chain.summary(persisted=persisted),
            audit=audit.freeze(),
        )

    async def _persist(self, chain: ChainRecord, audit: AuditLog) -> bool:
        """Write the chain to the ledger when one is configured; a ledger fault is audited,
        never allowed to lose the answer."""
        ledger = self._parts.ledger
        if ledger is None:
            return False
        from .storage import LedgerError  # loaded with the ledger

        try:
            with span("ledger_write"):
                await asyncio.to_thread(ledger.persist_chain, chain)
        except LedgerError as exc:
            audit.record("service", "ledger_error", reason=exc.reason, detail=str(exc))
            return False
        return True

    # -- sessions and discovery -----------------------------------------------------------
    def session(
        self, *, history_limit: int | None = None, last_plan: ExternalQueryPlan | None = None
    ) -> Session:
        """A conversation whose follow-ups continue verifying on the external chain
        (``history_limit``: see ``Session``; ``last_plan``: resume one whose last question
        had that plan)."""
        return Session(self, history_limit=history_limit, last_plan=last_plan)

    async def aprobe(self) -> dict[str, Readiness]:
        """Each adapter's real, bounded readiness probe."""
        self._check_open()
        return await self.gateway.probe()

    async def aprobe_backends(self) -> dict[str, Readiness]:
        """The configured shared parts, each really asked now: ``ledger`` (a ledger file or
        database; not listed when answers keep their records in memory) and ``cache`` (only
        with ``[cache] url``). ``reason`` says why one is not ready."""
        self._check_open()
        return await self._parts.probe_backends()

    def probe(self) -> dict[str, Readiness]:
        """Synchronous ``aprobe``: each adapter's real, bounded readiness probe."""
        self._check_open()
        return self._portal.call(self.aprobe())

    def warm_up(self) -> None:
        """Pay now what the first question would otherwise pay for. Once per process: the
        page pipeline (trafilatura, htmldate, jusText's stoplists) run over a small built-in
        page when pages are analysed in this process (``[analysis] processes = 0``; the
        workers warm their own otherwise), rjieba's dictionary through one Chinese
        tokenization, the presenter's
        templates compiled, the Public Suffix List parsed, anyio's asyncio backend (which
        httpcore loads on its first request) imported, and, with ``[analysis] processes``
        above 0, the analysis workers started and warm (waited for up to
        ``WARM_UP_WORKERS_S``), and with ``[browser] mode`` on, Chromium started. For the
        synchronous calls' own loop: its page client built and its worker threads started
        (``awarm_up`` does that for the running loop instead). No network I/O and no adapter
        is called; safe to call again (later calls cost next to nothing). Raises
        ``ServiceClosed`` after ``close``."""
        self._check_open()
        self._warm_process()
        self._portal.call(self._prepare_loop())

    def _warm_process(self) -> None:
        """``warm_up``'s once-per-process part (CPU-bound; any thread)."""
        self._check_open()
        self._parts.warm_up()

    async def awarm_up(self) -> None:
        """``warm_up`` off the event loop (it is CPU-bound, about a quarter of a second cold),
        so a server can warm up while it already accepts connections; then the running
        loop's page client and worker threads are made ready."""
        self._check_open()
        await asyncio.to_thread(self._warm_process)
        await self._prepare_loop()

    async def _prepare_loop(self) -> None:
        """The running loop's page client built, and as many of its worker threads started
        as a question analyses pages at once (each worker is made on first use otherwise)."""
        await self._parts.prepare_loop(self.settings.network.max_pages)

    # -- lifecycle ----------------------------------------------------------------------
    def close(self) -> None:
        """Close HTTP clients, stop what adapters started (tool server processes) and the
        analysis workers, and end the private loop. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._portal.running:
            self._portal.call(self._parts.release_loop())
        self._portal.stop()
        self._parts.close()

    async def aclose(self) -> None:
        """Close this loop's HTTP clients, then everything else."""
        if self._closed:
            return
        await self._parts.release_loop()
        await self._parts.astop_workers()
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise ServiceClosed()


def _started_audit(
    question: str, planned: PlannerResult, follows: ExternalQueryPlan | None
) -> AuditLog:
    audit = AuditLog()
    audit.record("service", "question", question=question, route_mode="external", **caller())
    audit.extend(planned.audit_events(follows=follows))
    return audit


def _packet(
    question: str, gathered: GatherResult, outcome: VerifierOutcome
) -> ExternalContextPacket:
    return ExternalContextPacket(
        question=question,
        plan=gathered.plan,
        adapter_attempts=gathered.attempts,
        verified_evidence=outcome.admitted,
        verifier=outcome.result,
        uncertainties=outcome.uncertainties,
    )
