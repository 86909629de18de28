"""OpenTelemetry spans for each stage of an answer, through ``opentelemetry-api`` (the
optional ``[otel]`` extra); without it, or while the host has set no tracer provider, every
span here is a no-op that costs next to nothing.

The stages: ``planner``, ``adapter_attempt`` (one per adapter tried), ``page_fetch`` and
``page_analysis`` (one each per page read), ``verifier``, ``presenter`` and ``ledger_write``;
the HTTP service wraps them in one ``answer`` span, a child of the caller's W3C
``traceparent`` when it sent one (``continue_trace``). The spans go wherever the host's
tracer provider sends them (the OpenTelemetry SDK and an OTLP exporter: see the serving
documentation). Attributes are ids, counts, statuses and reasons only: never the question's
text, a URL's query, a page's text or a key.
"""

from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import Callable, Iterator
from typing import Any

from .._version import __version__

__all__ = ["SpanAttributes", "continue_trace", "otel_available", "span", "trace_id_of"]

#: What a span attribute may be.
SpanAttributes = str | int | float | bool

#: A W3C ``traceparent``: version 00, a 32-hex trace id, a 16-hex parent id, flags.
_TRACEPARENT = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}")


@functools.cache
def _tracer() -> Any:
    """The package's tracer, or None when ``opentelemetry-api`` is not installed. A
    tracer from the API follows whichever provider the host sets, even one set later."""
    try:
        from opentelemetry import trace
    except ImportError:
        return None
    return trace.get_tracer("external_query_service", __version__)


def otel_available() -> bool:
    """Whether ``opentelemetry-api`` is installed (spans are recorded, not no-ops)."""
    return _tracer() is not None


class _Span:
    """What a stage may add to its span once it knows more (a status, a count)."""

    __slots__ = ("_span",)

    def __init__(self, opened: Any = None) -> None:
        self._span = opened

    def set(self, key: str, value: SpanAttributes | None) -> None:
        """Set one attribute (None values are left out)."""
        if self._span is not None and value is not None:
            self._span.set_attribute(key, value)


#: What ``span`` gives when nothing would record the span (reusable: it holds no state).
_UNRECORDED: contextlib.AbstractContextManager[_Span] = contextlib.nullcontext(_Span())


@functools.cache
def _provider_unset() -> Callable[[], bool]:
    """Whether the host has set no tracer provider yet (asked at every span: one may be set
    at any time). Until it does, the API's tracers make spans that record nothing."""
    from opentelemetry import trace

    get, proxy = trace.get_tracer_provider, trace.ProxyTracerProvider
    return lambda: isinstance(get(), proxy)


def span(
    name: str, **attributes: SpanAttributes | None
) -> contextlib.AbstractContextManager[_Span]:
    """A span called ``name`` around the block, a child of the current one; ``attributes``
    with None values are left out. A no-op without ``opentelemetry-api``, and while no
    tracer provider is set: the span the API would make then records nothing, and making
    it (and making it current) is most of what a stage's tracing costs."""
    tracer = _tracer()
    if tracer is None or _provider_unset()():
        return _UNRECORDED
    return _recorded(tracer, name, attributes)


@contextlib.contextmanager
def _recorded(
    tracer: Any, name: str, attributes: dict[str, SpanAttributes | None]
) -> Iterator[_Span]:
    given = {key: value for key, value in attributes.items() if value is not None}
    with tracer.start_as_current_span(name, attributes=given) as opened:
        yield _Span(opened)


def trace_id_of(traceparent: str | None) -> str | None:
    """The trace id of a valid W3C ``traceparent`` header (lowercase hex), else None."""
    if traceparent is None:
        return None
    found = _TRACEPARENT.fullmatch(traceparent.strip().lower())
    if found is None or set(found.group(1)) == {"0"} or set(found.group(2)) == {"0"}:
        return None
    return found.group(1)


@contextlib.contextmanager
def continue_trace(traceparent: str | None) -> Iterator[None]:
    """Spans opened inside the block are children of the caller's ``traceparent`` (when it
    is valid and ``opentelemetry-api`` is installed), or of the span already current (a
    framework's server span continued that trace already); otherwise the block runs as it
    is."""
    if _tracer() is None or trace_id_of(traceparent) is None:
        yield
        return
    from opentelemetry import context, propagate, trace

    if trace.get_current_span().get_span_context().is_valid:
        yield  # a server span (FastAPI's own telemetry, say) continued the trace already
        return

    token = context.attach(propagate.extract({"traceparent": traceparent}))
    try:
        yield
    finally:
        context.detach(token)
