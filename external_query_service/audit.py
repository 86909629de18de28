"""The audit trace: one ordered record of what every stage decided and why."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, JsonValue

__all__ = ["AuditEvent", "AuditLog", "AuditStage", "AuditTrace"]

AuditStage = Literal["service", "planner", "gateway", "verifier", "presenter"]


class AuditEvent(BaseModel):
    """One decision of one stage: ``seq`` orders events across stages, ``detail`` is JSON."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    seq: int
    stage: AuditStage
    event: str
    detail: dict[str, JsonValue]


class AuditTrace(BaseModel):
    """Every audit event of one answer, in order, with lookups by stage and by name."""

    model_config = ConfigDict(frozen=True, extra="forbid")

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


class AuditLog:
    """The mutable recorder a run appends to; ``freeze()`` gives the trace."""

    def __init__(self) -> None:
        self._events: list[AuditEvent] = []

    def record(self, stage: AuditStage, event: str, **detail: JsonValue) -> None:
        """Append an event of ``stage`` with the next sequence number."""
        self._events.append(
            AuditEvent(seq=len(self._events) + 1, stage=stage, event=event, detail=detail)
        )

    def freeze(self) -> AuditTrace:
        """The events recorded so far as an immutable trace."""
        return AuditTrace(events=tuple(self._events))
