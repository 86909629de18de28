"""OpenTelemetry spans per stage, as children of the caller's ``traceparent``, received by the
SDK's in-memory exporter from a real server on loopback; and no-ops without the API."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from external_query_service import ExternalQueryService
from external_query_service.observability import _tracing as tracing_module
from external_query_service.testing import World
from tests.support.air_show import PAGE, QUESTION

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("opentelemetry.sdk")

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from external_query_service.server import ServerThread
from external_query_service.testing import hit, json_reply, searx_body

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
KEY = "k-trace-key-0123456789"


@pytest.fixture(scope="module")
def exporter() -> InMemorySpanExporter:
    """The process's tracer provider (it can be set once), exporting to memory."""
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    trace.set_tracer_provider(provider)
    return memory


@pytest.fixture
def world() -> Iterator[World]:
    with World() as opened:
        yield opened


def traced_service(world: World, tmp_path: Path) -> ExternalQueryService:
    pages = [world.page(f"site{n}.test", "/news", PAGE) for n in (1, 2)]
    search = world.searxng()
    hits = [hit(url, "Air show news", "new aircraft") for url in pages]
    world.route(f"{search['base_url']}/search", json_reply(searx_body(QUESTION, hits)))
    settings = world.settings(
        search,
        cache={"enabled": False},
        ledger={"path": str(tmp_path / "ledger.sqlite3")},
        server={"api_keys_env": "EQ_TRACE_KEYS"},
    )
    return ExternalQueryService(settings)


def test_stage_spans_are_children_of_the_callers_traceparent(
    world: World, tmp_path: Path, exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EQ_TRACE_KEYS", KEY)
    exporter.clear()
    with ServerThread(traced_service(world, tmp_path)) as server:
        reply = httpx.post(
            f"{server.url}/v1/answer",
            json={"question": QUESTION},
            headers={"X-API-Key": KEY, "traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01"},
            timeout=30,
        )
    assert reply.status_code == 200
    assert reply.json()["status"] == "answered"
    spans = [s for s in ours(exporter) if _trace_id(s) == TRACE_ID]
    names = [span.name for span in spans]
    for stage in (
        "answer",
        "planner",
        "adapter_attempt",
        "page_fetch",
        "page_analysis",
        "verifier",
        "presenter",
        "ledger_write",
    ):
        assert stage in names, names
    assert names.count("page_fetch") == 2
    (answer,) = (span for span in spans if span.name == "answer")
    # Up from the answer (through a framework's server span, if one was made): the caller's.
    everything = {span.context.span_id: span for span in exporter.get_finished_spans()}
    top = ([answer, *_ancestors(answer, everything)])[-1]
    assert top.parent is not None
    assert top.parent.is_remote
    assert f"{top.parent.span_id:016x}" == PARENT_ID
    by_id = {span.context.span_id: span for span in spans}
    for span in spans:
        if span is not answer:  # every stage sits under the answer's span
            assert _ancestors(span, by_id)[-1:] == [answer], span.name
    (fetch, *_) = (span for span in spans if span.name == "page_fetch")
    assert _ancestors(fetch, by_id)[0].name == "adapter_attempt"
    attempt = next(span for span in spans if span.name == "adapter_attempt")
    assert dict(attempt.attributes or {})["status"] == "ok"
    for span in spans:  # attributes carry no question text and no key
        for value in dict(span.attributes or {}).values():
            assert "aircraft" not in str(value).lower()
            assert KEY not in str(value)


def test_without_a_traceparent_the_answer_span_is_a_root(
    world: World, tmp_path: Path, exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EQ_TRACE_KEYS", KEY)
    exporter.clear()
    with ServerThread(traced_service(world, tmp_path)) as server:
        reply = httpx.post(
            f"{server.url}/v1/answer",
            json={"question": QUESTION},
            headers={"X-API-Key": KEY, "traceparent": "not-a-traceparent"},
            timeout=30,
        )
    assert reply.status_code == 200
    (answer,) = (span for span in ours(exporter) if span.name == "answer")
    everything = {span.context.span_id: span for span in exporter.get_finished_spans()}
    assert ([answer, *_ancestors(answer, everything)])[-1].parent is None  # a trace of its own
    assert f"{answer.context.trace_id:032x}" != TRACE_ID


def test_without_opentelemetry_spans_are_no_ops(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry", None)  # what an uninstalled API looks like
    tracing_module._tracer.cache_clear()
    try:
        assert not tracing_module.otel_available()
        with tracing_module.span("planner", count=1) as traced:
            traced.set("status", "ok")  # accepted, and dropped
        with tracing_module.continue_trace(f"00-{TRACE_ID}-{PARENT_ID}-01"):
            pass
    finally:
        tracing_module._tracer.cache_clear()


_PROVIDER_SET_LATER = """
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from external_query_service.observability import _tracing

assert _tracing.otel_available()
caller = trace.NonRecordingSpan(
    trace.SpanContext(0x4BF92F3577B34DA6A3CE929D0E0E4736, 0x00F067AA0BA902B7, is_remote=True)
)
with trace.use_span(caller), _tracing.span("planner", count=1) as traced:
    traced.set("status", "ok")
    # The caller's context is still the current one, as the API's no-op tracer leaves it.
    assert trace.get_current_span() is caller
assert _tracing.span("planner") is _tracing.span("verifier")  # nothing made per span
memory = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(memory))
trace.set_tracer_provider(provider)
with _tracing.span("planner", count=2, skipped=None) as traced:
    traced.set("status", "ok")
    assert trace.get_current_span().get_span_context().is_valid
(recorded,) = memory.get_finished_spans()
print(recorded.name, sorted(dict(recorded.attributes or {}).items()))
"""


def test_spans_record_nothing_until_a_provider_is_set_and_then_record() -> None:
    # A process of its own: a tracer provider can be set only once per process.
    done = subprocess.run(
        [sys.executable, "-c", _PROVIDER_SET_LATER], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "planner [('count', 2), ('status', 'ok')]"


@pytest.mark.parametrize(
    ("header", "found"),
    [
        (f"00-{TRACE_ID}-{PARENT_ID}-01", TRACE_ID),
        (f"00-{TRACE_ID.upper()}-{PARENT_ID}-00", TRACE_ID),
        (f"00-{'0' * 32}-{PARENT_ID}-01", None),
        (f"00-{TRACE_ID}-{'0' * 16}-01", None),
        (f"01-{TRACE_ID}-{PARENT_ID}-01", None),
        ("garbage", None),
        (None, None),
    ],
)
def test_a_traceparent_is_read_by_the_w3c_rules(header: str | None, found: str | None) -> None:
    assert tracing_module.trace_id_of(header) == found


def ours(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    """The spans this package's tracer made (not a framework's)."""
    return [
        span
        for span in exporter.get_finished_spans()
        if span.instrumentation_scope is not None
        and span.instrumentation_scope.name == "external_query_service"
    ]


def _trace_id(span: ReadableSpan) -> str:
    return f"{span.context.trace_id:032x}"


def _ancestors(span: ReadableSpan, by_id: dict[int, Any]) -> list[ReadableSpan]:
    """The span's parent, its parent's parent ... within this trace."""
    chain = []
    while span.parent is not None and span.parent.span_id in by_id:
        span = by_id[span.parent.span_id]
        chain.append(span)
    return chain
