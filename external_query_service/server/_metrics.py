"""Prometheus metrics for one app, in a registry of its own (two apps in one process, as in
tests, never collide in the global one).

- ``external_query_questions_total{status, reason}``: answers given
- ``external_query_question_seconds{route}``: time to answer (histogram)
- ``external_query_adapter_attempts_total{adapter, status}``: adapter attempts
- ``external_query_adapter_attempt_seconds{adapter}``: attempt time (histogram)
- ``external_query_fetched_pages_total{adapter}``: pages fetched
- ``external_query_fetched_bytes_total{adapter}``: page body bytes received from the network
- ``external_query_cache_hits_total{kind}``: cache hits (search, api, page, analysis)
- ``external_query_request_errors_total{reason}``: error answers
- ``external_query_questions_active``, ``external_query_questions_waiting``: the gate now
- ``external_query_cache_errors_total``: shared cache (Redis) operations that failed; each
  one meant a direct fetch instead (or a session not kept)
- ``external_query_cache_rejected_total``: shared cache entries whose signature did not
  verify (forged, or signed with another key); each was dropped and fetched again

Under ``serve --workers N`` (``PROMETHEUS_MULTIPROC_DIR`` set before the workers start)
every worker writes its samples to that folder and ``/metrics`` adds up all of them
(prometheus_client's multiprocess mode): counters and histograms are totals over the
workers; the two gauges are ``livesum`` (the workers alive now, each refreshed every
second) and a worker's files are marked dead when it stops.

Every counter moves when its event happens, never at scrape time: answers, attempts, pages
and bytes when an answer is given (``answered``; bytes from ``AdapterAttempt.bytes_fetched``,
so replies replayed from the cache add none), cache hits when the response cache or the
analysis memo uses a kept result (the service's ``cache_hits``, which this subscribes to).
"""

from __future__ import annotations

import asyncio
import os

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)

from ..models import ExternalAnswer
from ..observability._events import CACHE_HIT_KINDS
from ..service import ExternalQueryService

__all__ = ["CONTENT_TYPE_LATEST", "MULTIPROC_ENV", "ServerMetrics"]

#: Set (to a folder) for the workers of ``serve --workers N``: metrics are multiprocess.
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
#: How often a worker refreshes its gauges in multiprocess mode, in seconds.
_REFRESH_S = 1.0

#: Seconds; a question's whole budget (queue wait and gather deadline) reaches tens of seconds.
_SECONDS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0)


class ServerMetrics:
    """The server's Prometheus metrics: questions, attempts, pages, bytes, cache hits,
    latency. Subscribes to the service's cache hits; ``close()`` ends that."""

    def __init__(self, service: ExternalQueryService) -> None:
        #: True under ``serve --workers N``: samples go to files every worker adds up.
        self.multiprocess = bool(os.environ.get(MULTIPROC_ENV))
        self.registry = CollectorRegistry(auto_describe=True)
        registry = self.registry
        self.questions = Counter(
            "external_query_questions",
            "Answers given, by status and reason (reason 'none' when answered).",
            ["status", "reason"],
            registry=registry,
        )
        self.question_seconds = Histogram(
            "external_query_question_seconds",
            "Seconds from request to answer, waiting in line included.",
            ["route"],
            buckets=_SECONDS,
            registry=registry,
        )
        self.attempts = Counter(
            "external_query_adapter_attempts",
            "Adapter attempts, by adapter and status (ok, empty, failed, timeout, skipped).",
            ["adapter", "status"],
            registry=registry,
        )
        self.attempt_seconds = Histogram(
            "external_query_adapter_attempt_seconds",
            "Seconds one adapter attempt took.",
            ["adapter"],
            buckets=_SECONDS,
            registry=registry,
        )
        self.fetched_pages = Counter(
            "external_query_fetched_pages",
            "Pages fetched by adapters (a page count; bytes are external_query_fetched_bytes).",
            ["adapter"],
            registry=registry,
        )
        self.fetched_bytes = Counter(
            "external_query_fetched_bytes",
            "Page body bytes adapters received from the network (cache replays add none).",
            ["adapter"],
            registry=registry,
        )
        self.cache_hits = Counter(
            "external_query_cache_hits",
            "Cache hits, by kind: search, api and page replies, page analyses.",
            ["kind"],
            registry=registry,
        )
        for kind in CACHE_HIT_KINDS:
            self.cache_hits.labels(kind=kind)  # every kind shown, at 0 until its first hit
        self.request_errors = Counter(
            "external_query_request_errors",
            "Error answers, by reason (malformed_json, invalid_question, ...).",
            ["reason"],
            registry=registry,
        )
        self.cache_errors = Counter(
            "external_query_cache_errors",
            "Shared cache (Redis) operations that failed; answers fetched directly instead.",
            registry=registry,
        )
        self.cache_rejected = Counter(
            "external_query_cache_rejected",
            "Shared cache entries refused: their signature did not verify; fetched again.",
            registry=registry,
        )
        self._watch(service)

    def _watch(self, service: ExternalQueryService) -> None:
        """Follow ``service``: its shared cache's failures and refusals, its question gate
        (a gauge each for active and waiting questions) and its cache hits."""
        registry = self.registry
        if service.shared_cache is not None:
            service.shared_cache.link.on_error(self.cache_errors.inc)
            service.shared_cache.link.on_reject(self.cache_rejected.inc)
        self._gate = gate = service.questions
        self._active = Gauge(
            "external_query_questions_active",
            "Questions being worked on now.",
            multiprocess_mode="livesum",
            registry=registry,
        )
        self._waiting = Gauge(
            "external_query_questions_waiting",
            "Questions waiting in line for a slot now.",
            multiprocess_mode="livesum",
            registry=registry,
        )
        if not self.multiprocess:
            self._active.set_function(lambda: gate.active)
            self._waiting.set_function(lambda: gate.waiting)
        self._unsubscribe = service.cache_hits.subscribe(self.cache_hit)

    def answered(self, answer: ExternalAnswer, route: str, seconds: float) -> None:
        """Count one answer, its attempts and its time."""
        self.questions.labels(status=answer.status, reason=answer.reason or "none").inc()
        self.question_seconds.labels(route=route).observe(seconds)
        for attempt in answer.attempts:
            self.attempts.labels(adapter=attempt.adapter_id, status=attempt.status).inc()
            if attempt.status != "skipped":
                self.attempt_seconds.labels(adapter=attempt.adapter_id).observe(
                    attempt.duration_ms / 1000
                )
            if attempt.pages_fetched:
                self.fetched_pages.labels(adapter=attempt.adapter_id).inc(attempt.pages_fetched)
            if attempt.bytes_fetched:
                self.fetched_bytes.labels(adapter=attempt.adapter_id).inc(attempt.bytes_fetched)

    def cache_hit(self, kind: str) -> None:
        """Count one cache hit of ``kind`` (search, api, page, analysis)."""
        self.cache_hits.labels(kind=kind).inc()

    def error(self, reason: str) -> None:
        """Count one error answer with its HTTP status and reason."""
        self.request_errors.labels(reason=reason).inc()

    def refresh(self) -> None:
        """Set the gauges from the gate now (multiprocess mode; otherwise they read it)."""
        if self.multiprocess:
            self._active.set(self._gate.active)
            self._waiting.set(self._gate.waiting)

    async def keep_fresh(self) -> None:
        """Refresh the gauges every second until cancelled (multiprocess mode)."""
        while True:
            self.refresh()
            await asyncio.sleep(_REFRESH_S)

    def close(self) -> None:
        """The app is done with the service: stop counting its cache hits, and in
        multiprocess mode this process's live gauges stop counting."""
        self._unsubscribe()
        if self.multiprocess:
            multiprocess.mark_process_dead(os.getpid())  # type: ignore[no-untyped-call]

    def render(self) -> bytes:
        """The Prometheus text exposition of every metric (of every worker's, added up, in
        multiprocess mode)."""
        if not self.multiprocess:
            return generate_latest(self.registry)
        self.refresh()
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        return generate_latest(registry)
