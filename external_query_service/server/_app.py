"""``create_app``: the routes over one ``ExternalQueryService`` (see the package docstring).

FastAPI rather than bare Starlette: the request and answer models are pydantic already, so
FastAPI validates bodies and parameters with them and writes the OpenAPI document from the
same models, with no second description to keep in step.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import FastAPI, Path, Query, Request
from fastapi.responses import JSONResponse, Response

from .._evidence_store import MAX_READ_CHARS, ReadWindow
from .._version import __version__
from ..errors import ApiError, ServiceClosed
from ..execution._collector import tune_collector
from ..models import ExternalAnswer
from ..observability._tracing import span
from ..service import ExternalQueryService
from ..settings import ServerSettings
from ._access import AccessRules, Guard, document_access
from ._chat import add_chat_routes
from ._connections import limit_accept_errors
from ._correlation import RequestIds, log_answer
from ._cors import JsonCors
from ._errors import install_error_handlers
from ._hosts import HostAllowList
from ._limits import BodyLimit
from ._logs import AccessLog
from ._metrics import CONTENT_TYPE_LATEST, ServerMetrics
from ._schemas import AnswerRequest, ErrorBody, Health, ReadinessReport, ServedAnswer
from ._sessions import SessionTable, SharedSessionTable
from ._streaming import EVENT_STREAM, SSE_EVENT_SCHEMA, stream_answer, wants_stream
from ._verify_route import add_verify_route

__all__ = ["create_app"]

_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorBody, "description": meaning}
    for code, meaning in {
        400: "The body is not JSON, or the Host or X-Request-ID header is not accepted.",
        413: "The body is too large.",
        422: "The question, the semantics or a field is not acceptable (see reason).",
        503: "The service is overloaded (see Retry-After), or shutting down.",
        504: "The question ran past the request deadline.",
    }.items()
}
#: An answer route's 200: the answer, or (streaming) its Server-Sent Events.
_ANSWERED: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The answer; with Accept: text/event-stream or stream: true, its events.",
        "content": {EVENT_STREAM: {"schema": SSE_EVENT_SCHEMA}},
    }
}
_NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorBody, "description": "No such session or reference."}
}


class _InFlight:
    """The requests working on a question, so shutdown can let them finish first."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    async def run(self, call: Awaitable[ExternalAnswer]) -> ExternalAnswer:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            return await call
        finally:
            self._tasks.discard(task)

    async def drain(self, grace_s: float) -> None:
        """Wait up to ``grace_s`` for in-flight questions, then cancel the rest and wait for
        them to unwind (their clients get a 503 ``shutting_down``)."""
        pending = set(self._tasks)
        if pending:
            _, pending = await asyncio.wait(pending, timeout=grace_s)
        for task in pending:
            if not task.cancelling():  # the server may have cancelled it already
                task.cancel()
        if pending:
            await asyncio.wait(pending)


def create_app(
    service: ExternalQueryService,
    *,
    close_service: bool = True,
    warm_up: bool = True,
    owns_process: bool = False,
) -> FastAPI:
    """The ASGI app over ``service``, bounded by ``service.settings.server``. On start-up
    (the ASGI lifespan) the service warms up in the background unless ``warm_up`` is False
    (``awarm_up``: the first questions then find the text pipeline loaded and the analysis
    workers running; requests are served meanwhile). An app that ``owns_process`` (``serve``
    and its workers, not a host's thread) then sets the garbage collector from ``[server]
    gc_threshold`` and ``gc_freeze`` (``execution.tune_collector``). On shutdown in-flight
    questions get ``shutdown_grace_s`` to finish and are then cancelled; the service is closed
    unless ``close_service`` is False."""
    limits = service.settings.server
    metrics = ServerMetrics(service)
    shared = service.shared_cache
    sessions: SessionTable | SharedSessionTable = (
        SharedSessionTable(shared.values, service, idle_s=limits.session_idle_s)
        if shared is not None
        else SessionTable(max_sessions=limits.max_sessions, idle_s=limits.session_idle_s)
    )
    answering = _Answering(service, metrics)
    access = AccessRules(limits, link=shared.link if shared is not None else None)
    app = FastAPI(
        title="external-query",
        version=__version__,
        summary="Answers questions only from external evidence.",
        lifespan=_lifespan(
            service,
            metrics,
            answering.in_flight,
            warm_up=warm_up,
            owns_process=owns_process,
            close_service=close_service,
        ),
        # The contract is /openapi.json; its pages (which load their scripts from a CDN) are
        # how a newcomer reads it. [server] docs = false serves none of the three.
        openapi_url="/openapi.json" if limits.docs else None,
        docs_url="/docs" if limits.docs else None,
        redoc_url="/redoc" if limits.docs else None,
    )
    _add_middleware(app, limits, access, metrics)
    install_error_handlers(app, metrics.error)
    document_access(
        app,
        open_paths=access.open_paths,
        keyed=access.keys.configured,
        limited=access.limited,
    )
    app.state.service = service
    app.state.metrics = metrics
    app.state.sessions = sessions
    # The order routes are added in is the order /openapi.json lists them.
    _add_answer_routes(app, answering, sessions)
    add_chat_routes(
        app,
        service,
        answered=answering.answered,
        heartbeat_s=limits.stream_heartbeat_s,
        count_error=metrics.error,
    )
    _add_evidence_route(app, service)
    add_verify_route(app, service, errors=_ERRORS)
    _add_health_routes(app, service, metrics)
    return app


def _lifespan(
    service: ExternalQueryService,
    metrics: ServerMetrics,
    in_flight: _InFlight,
    *,
    warm_up: bool,
    owns_process: bool,
    close_service: bool,
) -> Callable[[FastAPI], contextlib.AbstractAsyncContextManager[None]]:
    """The app's lifespan: the metrics refresher and the warm-up started; on shutdown both
    stopped, in-flight questions drained, the metrics and (unless not asked) the service
    closed."""

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        limit_accept_errors(asyncio.get_running_loop())
        refresher = asyncio.create_task(metrics.keep_fresh()) if metrics.multiprocess else None
        warming = (
            asyncio.create_task(_warm_up(service, owns_process=owns_process)) if warm_up else None
        )
        try:
            yield
        finally:
            for task in (refresher, warming):
                if task is not None:
                    task.cancel()
            await in_flight.drain(service.settings.server.shutdown_grace_s)
            if warming is not None:
                await asyncio.gather(warming, return_exceptions=True)
            metrics.close()
            if close_service:
                await service.aclose()

    return lifespan


def _add_middleware(
    app: FastAPI, limits: ServerSettings, access: AccessRules, metrics: ServerMetrics
) -> None:
    """The first added runs innermost: the access line, ids, then Host, CORS, keys and
    limits, body size."""
    app.add_middleware(
        BodyLimit, max_bytes=limits.max_request_bytes, timeout_s=limits.body_timeout_s
    )
    app.add_middleware(Guard, rules=access, count=metrics.error, routes=app.router.routes)
    if limits.cors_origins:
        app.add_middleware(
            JsonCors,
            count=metrics.error,
            allow_origins=list(limits.cors_origins),
            allow_methods=["GET", "POST"],
            allow_headers=[
                "Authorization",
                "X-API-Key",
                "Content-Type",
                "X-Request-ID",
                "traceparent",
            ],
            expose_headers=[
                "X-Request-ID",
                "Retry-After",
                "X-RateLimit-Limit",
                "X-RateLimit-Remaining",
                "X-RateLimit-Reset",
            ],
        )
    app.add_middleware(HostAllowList, allowed=limits.allowed_hosts, count=metrics.error)
    app.add_middleware(RequestIds)
    app.add_middleware(AccessLog)  # outermost: it logs every answer, refusals included


class _Answering:
    """How every answer route runs a question: under the request deadline, counted in the
    metrics and the answer log, and drained on shutdown."""

    def __init__(self, service: ExternalQueryService, metrics: ServerMetrics) -> None:
        self.service = service
        self.metrics = metrics
        self.limits = service.settings.server
        self.in_flight = _InFlight()

    async def answered(
        self, route: str, question: str, call: Callable[[], Awaitable[ExternalAnswer]]
    ) -> ExternalAnswer:
        limits = self.limits
        started = time.perf_counter()
        deadline = asyncio.timeout(limits.request_deadline_s)
        try:
            async with deadline:
                with span("answer", route=route):
                    found = await self.in_flight.run(call())
        except TimeoutError:
            if not deadline.expired():
                raise
            raise ApiError(
                504,
                "deadline_exceeded",
                f"no answer within the request deadline of {limits.request_deadline_s:g} s",
            ) from None
        except asyncio.CancelledError:
            # Shutdown cancels the questions still running when its grace runs out (uvicorn
            # does, and so does the lifespan's drain): their clients get a retryable 503, not
            # a bare 500 or a dropped connection.
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            raise ApiError(
                503, "shutting_down", "the service stopped before the answer was ready"
            ) from None
        seconds = time.perf_counter() - started
        self.metrics.answered(found, route, seconds)
        log_answer(
            found, route=route, seconds=seconds, question=question if limits.log_questions else None
        )
        if found.reason == "overloaded":
            raise _overloaded(self.service)
        return found

    async def reply(
        self,
        http: Request,
        request: AnswerRequest,
        route: str,
        ask: Callable[[], Awaitable[ExternalAnswer]],
        keep: Callable[[], Awaitable[str]],
    ) -> Response:
        """The answer with its session id (``keep()`` keeps the session), or its events.
        A question the service would refuse is refused here, before any event is sent."""
        service = self.service
        service.check_question(request.question, request.semantics)

        async def body() -> dict[str, Any]:
            found = await self.answered(route, request.question, ask)
            served = _served(found, await keep())
            if request.bundle:
                served["bundle"] = json.loads(found.bundle(settings=service.settings))
            return served

        if wants_stream(http, request.stream):
            return stream_answer(
                body, heartbeat_s=self.limits.stream_heartbeat_s, count_error=self.metrics.error
            )
        return JSONResponse(await body())


def _add_answer_routes(
    app: FastAPI, answering: _Answering, sessions: SessionTable | SharedSessionTable
) -> None:
    """``POST /v1/answer`` (a new session) and ``POST /v1/sessions/{id}/follow-up``."""
    service = answering.service

    @app.post(
        "/v1/answer",
        response_model=ServedAnswer,
        responses={**_ERRORS, **_ANSWERED},
        summary="Answer a question from external evidence",
    )
    async def answer(request: AnswerRequest, http: Request) -> Response:
        session = service.session(history_limit=0)
        return await answering.reply(
            http,
            request,
            "answer",
            lambda: session.aask(request.question, request.semantics),
            lambda: sessions.aadd(session),
        )

    @app.post(
        "/v1/sessions/{session_id}/follow-up",
        response_model=ServedAnswer,
        responses={**_ERRORS, **_NOT_FOUND, **_ANSWERED},
        summary="Ask a follow-up that continues a session's plan",
    )
    async def follow_up(
        session_id: Annotated[str, Path(description="From an earlier answer.")],
        request: AnswerRequest,
        http: Request,
    ) -> Response:
        try:
            session = await sessions.aget(session_id)
        except KeyError:
            raise ApiError(
                404, "unknown_session", "unknown session (it may have expired)"
            ) from None

        async def keep() -> str:
            await sessions.asave(session_id, session)
            return session_id

        return await answering.reply(
            http,
            request,
            "follow_up",
            lambda: session.afollow_up(request.question, request.semantics),
            keep,
        )


def _add_evidence_route(app: FastAPI, service: ExternalQueryService) -> None:
    """``GET /v1/evidence/{ref}``: a window of a stored capture."""

    @app.get(
        "/v1/evidence/{ref}",
        response_model=ReadWindow,
        responses=_NOT_FOUND,
        summary=f"Read at most {MAX_READ_CHARS:,} characters of a stored capture",
    )
    async def evidence(
        ref: Annotated[str, Path(description="An evidence item's ref (ev:...).")],
        offset: Annotated[int, Query(ge=0, description="Where to start, in characters.")] = 0,
        limit: Annotated[
            int, Query(ge=1, le=MAX_READ_CHARS, description="The most characters to return.")
        ] = MAX_READ_CHARS,
    ) -> ReadWindow:
        try:
            return service.store.window(ref, offset, limit)
        except KeyError:
            raise ApiError(404, "unknown_ref", f"unknown evidence reference: {ref}") from None


def _add_health_routes(app: FastAPI, service: ExternalQueryService, metrics: ServerMetrics) -> None:
    """``GET /healthz``, ``GET /readyz`` and ``GET /metrics``."""

    @app.get("/healthz", response_model=Health, summary="The process answers")
    async def healthz() -> Health:
        gate = service.questions
        return Health(questions_active=gate.active, questions_waiting=gate.waiting, pid=os.getpid())

    @app.get(
        "/readyz",
        response_model=ReadinessReport,
        responses={
            503: {
                "model": ReadinessReport,
                "description": "No adapter is ready, or the configured ledger is not.",
            }
        },
        summary="Whether any adapter is ready (each adapter's probe), and the ledger and cache",
    )
    async def readyz() -> Response:
        probes = await service.aprobe()
        backends = await service.aprobe_backends()
        ledger = backends.get("ledger")
        report = ReadinessReport(
            ready=any(item.ready for item in probes.values()) and (ledger is None or ledger.ready),
            adapters=probes,
            ledger=ledger,
            cache=backends.get("cache"),
        )
        return JSONResponse(
            report.model_dump(mode="json"), status_code=200 if report.ready else 503
        )

    @app.get(
        "/metrics",
        response_class=Response,
        responses={200: {"content": {CONTENT_TYPE_LATEST: {}}}},
        summary="Prometheus metrics",
    )
    async def prometheus() -> Response:
        return Response(metrics.render(), media_type=CONTENT_TYPE_LATEST)


async def _warm_up(service: ExternalQueryService, *, owns_process: bool = False) -> None:
    """``awarm_up``, unless the service was closed first (a host's own shutdown); then, in a
    process the app owns, the collector set for serving (what warm-up loaded frozen)."""
    with contextlib.suppress(ServiceClosed):
        await service.awarm_up()
        if owns_process:
            limits = service.settings.server
            tune_collector(limits.gc_threshold, freeze=limits.gc_freeze)


def _overloaded(service: ExternalQueryService) -> ApiError:
    """503 ``overloaded``: no slot freed within ``queue_timeout_s``; try again after it."""
    wait_s = max(1, math.ceil(service.settings.network.queue_timeout_s))
    return ApiError(
        503,
        "overloaded",
        f"every question slot is busy; retry after {wait_s} s",
        headers={"Retry-After": str(wait_s)},
    )


def _served(found: ExternalAnswer, session_id: str) -> dict[str, Any]:
    """The answer as ``ask --format json`` prints it, plus ``session_id``."""
    body = found.model_dump(mode="json")
    body["session_id"] = session_id
    return body
