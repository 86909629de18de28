"""The audit trace: one ordered record of what every stage decided and why."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from typing import Literal, NamedTuple

from pydantic import JsonValue

from ._frozen import Frozen

__all__ = [
    "AuditEvent",
    "AuditListener",
    "AuditLog",
    "AuditStage",
    "AuditTrace",
    "StageEvent",
    "caller",
    "listening",
    "on_behalf_of",
]

AuditStage = Literal["service", "planner", "gateway", "verifier", "presenter"]


class AuditEvent(Frozen):
    """One decision of one stage: ``seq`` orders events across stages, ``detail`` is JSON."""

    seq: int
    stage: AuditStage
    event: str
    detail: dict[str, JsonValue]


class AuditTrace(Frozen):
    """Every audit event of one answer, in order, with lookups by stage and by name."""

    events: tuple[AuditEvent, ...] = ()

    def for_stage(self, stage: AuditStage) -> tuple[AuditEvent, ...]:
        """The events ``stage`` recorded, in order."""
        return tuple(event for event in self.events if event.stage == stage)

    def named(self, event: str) -> tuple[AuditEvent, ...]:
        """The events called ``event``, in order."""
        return tuple(item for item in self.events if item.event == event)

    def explain(self) -> str:
        """A compact, line-per-event rendering for operators."""
        lines = []
        for item in self.events:
            pairs = ", ".join(f"{key}={value}" for key, value in item.detail.items())
            lines.append(f"{item.seq:>3} {item.stage}.{item.event}: {pairs}")
        return "\n".join(lines)


class StageEvent(NamedTuple):
    """An audit event a stage's result carries, before a log numbers it: what its
    ``audit_events()`` returns and ``AuditLog.extend`` records."""

    stage: AuditStage
    event: str
    detail: dict[str, JsonValue]


#: Told of each event the moment it is recorded (a stream of progress, say).
AuditListener = Callable[[AuditEvent], None]

#: The listener an ``AuditLog`` made in this context tells (``listening`` sets it).
_listener: ContextVar[AuditListener | None] = ContextVar("audit_listener", default=None)


@contextlib.contextmanager
def listening(listener: AuditListener) -> Iterator[None]:
    """Every ``AuditLog`` made inside the block (in this task, or in tasks it starts) calls
    ``listener(event)`` as each event is recorded, on the recording thread. A listener
    must be quick and must not raise: it runs inside the stage that records."""
    token = _listener.set(listener)
    try:
        yield
    finally:
        _listener.reset(token)


#: Who asked, as the audit's ``question`` event names it: ``request_id`` (the caller's
#: ``X-Request-ID``) and ``trace_id`` (its W3C ``traceparent``), when known.
_caller: ContextVar[dict[str, str] | None] = ContextVar("audit_caller", default=None)


@contextlib.contextmanager
def on_behalf_of(**ids: str) -> Iterator[None]:
    """Questions answered inside the block name ``ids`` (``request_id``, ``trace_id``) in
    their audit's ``question`` event, so a caller can tie its call to the answer."""
    token = _caller.set(dict(ids))
    try:
        yield
    finally:
        _caller.reset(token)


def caller() -> dict[str, str]:
    """The ids ``on_behalf_of`` set for this context (empty outside it)."""
    return dict(_caller.get() or {})


class AuditLog:
    """The mutable recorder a run appends to; ``freeze()`` gives the trace. A log made
    inside ``listening(listener)`` tells that listener of each event as it is recorded."""

    def __init__(self) -> None:
        self._events: list[AuditEvent] = []
        self._listener = _listener.get()

    def record(self, stage: AuditStage, event: str, **detail: JsonValue) -> None:
        """Append an event of ``stage`` with the next sequence number."""
        item = AuditEvent(seq=len(self._events) + 1, stage=stage, event=event, detail=detail)
        self._events.append(item)
        if self._listener is not None:
            self._listener(item)

    def extend(self, events: Iterable[StageEvent]) -> None:
        """Record each of ``events`` (a stage result's ``audit_events()``) in order."""
        for item in events:
            self.record(item.stage, item.event, **item.detail)

    def freeze(self) -> AuditTrace:
        """The events recorded so far as an immutable trace."""
        return AuditTrace(events=tuple(self._events))
