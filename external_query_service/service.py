"""The public entry point: ``ExternalQueryService`` and its follow-up ``Session``.

plan → gather → verify → packet → present, each stage a typed model, all of it audited.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from ._audit import AuditLog, caller
from .adapters.base import Adapter, AdapterRuntime, ToolObserver, analysis_memo
from .admission.chain import ChainRecord, bind_answer, service_envelope
from .errors import InvalidQuery, ServiceClosed
from .gateway.gateway import ExternalQueryGateway
from .gateway.registry import adapter_class
from .gateway.second_round import second_round_queries
from .models import (
    CORE_QUERY_KINDS,
    AdmissionSummary,
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
from .net.cache import response_cache
from .net.fetch import HttpRuntime
from .net.sites import registrable_domain
from .planner.structured import ExternalQueryPlanner, PlannerResult, StructuredPlanner
from .presenter.extractive import ExternalAnswerPresenter
from .runtime._closing import Closing
from .runtime._portal import Portal
from .runtime.analysis_pool import AnalysisPool, warm_pipeline
from .runtime.clock import Clock, system_clock
from .runtime.concurrency import QuestionGate
from .runtime.events import CacheHits
from .runtime.evidence_store import EvidenceStore
from .runtime.tracing import span
from .settings import CacheSettings, Settings, format_validation_error
from .verifier import EvidenceVerifier

if TYPE_CHECKING:
    from .browser import BrowserProvider
    from .llm import ChatCompletionsClient
    from .presenter import LLMAnswerPresenter
    from .storage import Ledger
    from .storage.redis_cache import RedisMemo, SharedCache

__all__ = [
    "MAX_QUESTION_CHARS",
    "WARM_UP_WORKERS_S",
    "ExternalQueryService",
    "Session",
    "coerce_semantics",
]

#: The longest question ``answer()`` takes, in characters (after stripping white space).
MAX_QUESTION_CHARS = 20_000

#: How long ``warm_up`` waits for the analysis workers to be warm (they keep starting after).
WARM_UP_WORKERS_S = 60.0

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


class ExternalQueryService(Closing):
    """Answers questions only from external evidence.

    ``settings`` says which adapters exist (none by default); ``clock`` is the "now" for
    every time check; ``planner`` is an optional structured planner hook; ``store`` keeps
    the text of every page read; ``http`` replaces the network runtime (it must offer
    ``fetcher``, ``endpoint(base_url)`` and ``aclose()``); ``tool_observer`` is told of every
    call an adapter makes to a tool server outside HTTP (a recording keeps them).

    One service serves many callers at once: ``[network] max_concurrent_questions`` bounds
    the questions it works on together (``questions`` counts them); the rest wait in line up
    to ``queue_timeout_s``, then end as ``insufficient_evidence`` with the retryable reason
    ``overloaded``, without any planner model, adapter or ledger work.
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
        caching = self.settings.cache
        self.store = (
            store
            if store is not None
            else EvidenceStore(caching.store_max_bytes, hold_s=caching.store_hold_s)
        )
        #: Cache hits (response cache and page analyses) as they happen; ``subscribe`` to
        #: count them (the server's metrics do).
        self.cache_hits = CacheHits()
        #: The Redis cache ``[cache] url`` names (None: everything in this process's memory).
        self.shared_cache: SharedCache | None = _open_shared_cache(caching)
        shared = self.shared_cache
        # ``http`` lets a caller wrap network access (recording a fixture world, say).
        self._http = (
            http
            if http is not None
            else HttpRuntime(
                self.settings.network,
                cache=response_cache(
                    caching,
                    self.clock,
                    shared.responses if shared is not None else None,
                    on_hit=self.cache_hits.hit,
                ),
                clock=self.clock,
            )
        )
        #: Where pages are analysed: ``[analysis] processes`` workers, started on first use.
        self.analysis = AnalysisPool(
            self.settings.analysis, max_page_bytes=self.settings.network.max_page_bytes
        )
        runtime = AdapterRuntime(
            network=self.settings.network,
            fetcher=self._http.fetcher,
            endpoint=self._http.endpoint,
            store=self.store,
            clock=self.clock,
            sources=self.settings.sources,
            analyses=analysis_memo(
                caching,
                _shared_analyses(shared),
                on_hit=self.cache_hits.hit,
                runner=self.analysis.run,
            ),
            search_endpoint=self._http.search_endpoint,
            tool_observer=tool_observer,
        )
        adapters: list[Adapter] = [
            adapter_class(config.kind)(config, runtime) for config in self.settings.adapters
        ]
        self.gateway = ExternalQueryGateway(
            adapters, deadline_s=self.settings.network.deadline_s, needs=self.settings.verifier
        )
        kinds = (*CORE_QUERY_KINDS, *(k for a in adapters for k in a.supported_query_kinds))
        #: Every query kind a question may name: the core kinds and the configured adapters'.
        self.query_kinds: tuple[str, ...] = tuple(dict.fromkeys(kinds))
        self.verifier = EvidenceVerifier(self.settings)
        self.presenter = ExternalAnswerPresenter(language=self.settings.presenter.language)
        # One model client, injected into planner and presenter; neither builds its own.
        # The model package is imported only when ``[llm]`` is configured.
        self.llm: ChatCompletionsClient | None = None
        self._llm_presenter: LLMAnswerPresenter | None = None
        if self.settings.llm:
            from .llm import ChatCompletionsClient
            from .planner import LLMPlanner
            from .presenter import LLMAnswerPresenter

            self.llm = ChatCompletionsClient(self.settings.llm)
            if planner is None:  # an explicit hook still wins
                planner = LLMPlanner(self.llm, kinds=self.query_kinds, clock=self.clock)
            self._llm_presenter = LLMAnswerPresenter(self.llm, extractive=self.presenter)
        self.planner = ExternalQueryPlanner(planner)
        self._envelope = service_envelope(self.settings)
        self._ledger: Ledger | None = None
        if self.settings.ledger.url is not None or self.settings.ledger.path is not None:
            from .storage import open_configured_ledger  # only a configured ledger needs it

            self._ledger = open_configured_ledger(self.settings.ledger, clock=self.clock)
        #: The questions worked on now and waiting in line (shared by every event loop).
        self.questions = QuestionGate(self.settings.network.max_concurrent_questions)
        #: The headless browser (``[browser] mode`` not ``off``); its Chromium starts with
        #: the first page rendered. None with the mode off: nothing browser is ever loaded.
        self.browser: BrowserProvider | None = None
        if self.settings.browser.mode != "off":
            from .browser import BrowserProvider

            self.browser = BrowserProvider(self.settings.browser, self.settings.network)
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
        question = _check_question(question)
        semantics = self._semantics(query_semantics)
        started = time.monotonic()
        async with self._admission() as admitted:
            if not admitted:
                # The structured planner (a model, perhaps) is work to shed: plan from the
                # host's fields only.
                shed = await ExternalQueryPlanner().plan(question, semantics)
                return await self._overloaded(question, shed.plan, waited_from=started)
            with span("planner"):
                planned = await self.planner.plan(question, semantics)
            with self.store.question():  # its captures stay readable while it is answered
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
        with span("planner", follow_up=True):
            planned = self.planner.plan_follow_up(
                question, previous, self._semantics(query_semantics)
            )
        started = time.monotonic()
        async with self._admission() as admitted:
            if not admitted:
                return await self._overloaded(
                    question, planned.plan, follows=previous, waited_from=started
                )
            with self.store.question():
                return await self._run(question, planned, follows=previous)

    def _admission(self) -> AbstractAsyncContextManager[bool]:
        return self.questions.enter(self.settings.network.queue_timeout_s)

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
            conflicts=[conflict.model_dump(mode="json") for conflict in result.conflicts],
            copies=[group.model_dump(mode="json") for group in result.copies],
        )
        packet = _packet(question, gathered, outcome)
        with span("presenter", model=self._llm_presenter is not None):
            if self._llm_presenter is not None:
                shown = await self._llm_presenter.present(packet)
            else:
                shown = self.presenter.present(packet)
        return await self._conclude(question, gathered, outcome, shown, audit)

    @contextlib.asynccontextmanager
    async def _question_browser(self) -> AsyncIterator[None]:
        """The question's own browser session while its evidence is gathered, when the
        browser is on (closed as the gathering ends: nothing is carried to the next
        question)."""
        if self.browser is None:
            yield
            return
        from .browser import QuestionBrowser, question_browser

        visit = QuestionBrowser(self.browser)
        token = question_browser.set(visit)
        try:
            yield
        finally:
            question_browser.reset(token)
            await visit.close()

    async def _second_round(
        self,
        gathered: GatherResult,
        outcome: VerifierOutcome,
        audit: AuditLog,
        deadline: float,
    ) -> tuple[GatherResult, VerifierOutcome]:
        """One more bounded search round when the first verdict names something searching
        can fix (``gateway.second_round``), then the verdict again; else both unchanged."""
        first = outcome.result
        queries = second_round_queries(gathered.plan, first)
        if not queries:
            return gathered, outcome
        audit.record(
            "gateway",
            "second_round",
            round=2,
            queries=list(queries),
            after={
                "status": first.status,
                "reason": first.reason,
                "missing_targets": list(first.missing_targets),
                "conflicts": len(first.conflicts),
            },
        )
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
        audit.record(
            "presenter",
            "render",
            template=shown.template,
            prompt_template=shown.prompt_template,
            prompt_digest=shown.prompt_digest,
            renderer=shown.renderer,
            fallback_reason=shown.fallback_reason,
            sources=len(shown.sources),
            sentences=[sentence.model_dump(mode="json") for sentence in shown.sentences],
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
        from .storage import LedgerError  # loaded with the ledger

        try:
            with span("ledger_write"):
                await asyncio.to_thread(self._ledger.persist_chain, chain)
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
        from .storage import SCHEMA_VERSION, LedgerError  # loaded with the ledger

        self._check_open()
        found: dict[str, Readiness] = {}
        if self._ledger is not None:
            ledger = self._ledger
            try:
                version = await asyncio.wait_for(asyncio.to_thread(ledger.schema_version), _PROBE_S)
                found["ledger"] = Readiness(
                    ready=version == SCHEMA_VERSION,
                    reason=None if version == SCHEMA_VERSION else "ledger_needs_migration",
                )
            except LedgerError as exc:
                found["ledger"] = Readiness(ready=False, reason=exc.reason)
            except (TimeoutError, OSError):
                found["ledger"] = Readiness(ready=False, reason="ledger_unavailable")
        if self.shared_cache is not None:
            why = await asyncio.to_thread(self.shared_cache.ping)
            # Ready but ``unsigned``: anyone who can write to Redis could plant entries.
            unsigned = None if self.shared_cache.signed else "unsigned"
            found["cache"] = Readiness(
                ready=why is None, reason=unsigned if why is None else "cache_unavailable"
            )
        return found

    def probe(self) -> dict[str, Readiness]:
        """Synchronous ``aprobe``: each adapter's real, bounded readiness probe."""
        self._check_open()
        return self._portal.call(self.aprobe())

    def warm_up(self) -> None:
        """Pay now what the first question would otherwise pay for. Once per process: the
        page pipeline (trafilatura, htmldate, jusText's stoplists) run over a small built-in
        page, rjieba's dictionary through one Chinese tokenization, the presenter's
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
        self.analysis.start()  # the workers warm up beside this process
        if self.browser is not None:
            self.browser.start()
        warm_pipeline()
        self.presenter.load_templates()
        registrable_domain("www.example.com")  # the Public Suffix List, parsed once
        # httpcore asks anyio for the running loop's backend on its first request; anyio
        # imports that backend then. One empty run here imports it instead, on a thread of
        # its own (this one may be running a loop already).
        import threading

        import anyio

        runner = threading.Thread(target=anyio.run, args=(anyio.sleep, 0), name="eqs-warm-up")
        runner.start()
        runner.join()
        self.analysis.wait_ready(WARM_UP_WORKERS_S)

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
        self._http.fetcher.prepare()
        pause = functools.partial(time.sleep, 0.002)  # busy long enough to need another
        await asyncio.gather(
            *(asyncio.to_thread(pause) for _ in range(self.settings.network.max_pages))
        )

    # -- lifecycle ----------------------------------------------------------------------
    def close(self) -> None:
        """Close HTTP clients, stop what adapters started (tool server processes) and the
        analysis workers, and end the private loop. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._portal.running:
            self._portal.call(self._release())
        self._portal.stop()
        self.analysis.close()
        if self.browser is not None:
            self.browser.close()
        if self._ledger is not None:
            self._ledger.close()
        if self.shared_cache is not None:
            self.shared_cache.close()

    async def aclose(self) -> None:
        """Close this loop's HTTP clients, then everything else."""
        if self._closed:
            return
        await self._release()
        await asyncio.to_thread(self.analysis.close)
        if self.browser is not None:
            await self.browser.aclose()
        self.close()

    async def _release(self) -> None:
        """Everything held on the running loop: adapters' processes, then HTTP clients."""
        for adapter in self.gateway.adapters.values():
            await adapter.aclose()
        await self._http.aclose()

    def _check_open(self) -> None:
        if self._closed:
            raise ServiceClosed()


def _started_audit(
    question: str, planned: PlannerResult, follows: ExternalQueryPlan | None
) -> AuditLog:
    audit = AuditLog()
    audit.record("service", "question", question=question, route_mode="external", **caller())
    plan = planned.plan
    audit.record(
        "planner",
        "plan",
        source=plan.planner_source,
        fallback_reason=planned.fallback_reason,
        follows=follows.question if follows else None,
        plan=plan.model_dump(mode="json"),
    )
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


class Session:
    """Keeps the last plan so a follow-up re-plans from it (``route_mode`` stays external);
    ``last_plan`` resumes a session kept elsewhere (a server's shared session table).

    ``history`` holds the answers, only the latest ``history_limit`` of them when a limit is
    given (0 keeps none: a long-lived server needs the last plan, not every answer).
    """

    def __init__(
        self,
        service: ExternalQueryService,
        *,
        history_limit: int | None = None,
        last_plan: ExternalQueryPlan | None = None,
    ) -> None:
        if history_limit is not None and history_limit < 0:
            raise ValueError("history_limit must not be negative")
        self._service = service
        self._history_limit = history_limit
        self._last_plan: ExternalQueryPlan | None = last_plan
        self.history: list[ExternalAnswer] = []

    @property
    def last_plan(self) -> ExternalQueryPlan | None:
        """The plan of the session's last question (None before the first)."""
        return self._last_plan

    def _keep(self, answer: ExternalAnswer) -> ExternalAnswer:
        self._last_plan = answer.plan
        self.history.append(answer)
        if self._history_limit is not None:
            del self.history[: len(self.history) - self._history_limit]
        return answer

    async def aask(self, question: str, query_semantics: SemanticsInput = None) -> ExternalAnswer:
        """Ask a new question in this session; it becomes the plan follow-ups continue from."""
        return self._keep(await self._service.aanswer(question, query_semantics))

    def ask(self, question: str, query_semantics: SemanticsInput = None) -> ExternalAnswer:
        """Synchronous ``aask``."""
        return self._service._portal.call(self.aask(question, query_semantics))

    async def afollow_up(
        self, question: str, query_semantics: SemanticsInput = None
    ) -> ExternalAnswer:
        """Continue the last question (same kind, targets, place and time range) with new
        external attempts; without a previous question it is asked afresh."""
        previous = self.last_plan
        if previous is None:
            return await self.aask(question, query_semantics)
        return self._keep(await self._service._follow_up(question, previous, query_semantics))

    def follow_up(self, question: str, query_semantics: SemanticsInput = None) -> ExternalAnswer:
        """Synchronous ``afollow_up``."""
        return self._service._portal.call(self.afollow_up(question, query_semantics))


#: The longest a readiness probe of the ledger waits.
_PROBE_S = 5.0


def _open_shared_cache(caching: CacheSettings) -> SharedCache | None:
    """The Redis cache ``[cache] url`` names; its module is imported only then."""
    if caching.url is None:
        return None
    from .storage.redis_cache import open_shared_cache

    return open_shared_cache(caching)


def _encode_analysis(value: Any) -> bytes | None:
    """A page analysis as JSON for the shared cache (anything else is not shared)."""
    from .text.analyse import PageAnalysis, analysis_to_json

    return analysis_to_json(value) if isinstance(value, PageAnalysis) else None


def _shared_analyses(shared: SharedCache | None) -> RedisMemo | None:
    if shared is None:
        return None
    from .storage.redis_cache import ANALYSIS_TTL_S, RedisMemo
    from .text.analyse import analysis_from_json

    return RedisMemo(
        shared.analyses,
        encode=_encode_analysis,
        decode=analysis_from_json,
        ttl_s=ANALYSIS_TTL_S,
    )


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
