"""Progress while a question is answered, read from its audit as each event is recorded.

Three audit events are progress a caller can use: ``planner.plan`` (``plan``: what will be
looked up), each ``gateway.attempt`` (``attempt``: an adapter tried or skipped, its status
and the pages it read) and ``verifier.outcome`` (``verified``: the verdict, before the text
is written). The HTTP service streams them as Server-Sent Events; ``ask`` prints them on
stderr. Both see them through ``audit.listening``, so they arrive as the chain works, not
replayed at the end.
"""

from __future__ import annotations

from typing import Any

from pydantic import JsonValue

from .._audit import AuditEvent

__all__ = ["ProgressEvent", "describe", "progress_event"]

#: A progress event: its name (``plan``, ``attempt``, ``verified``) and its JSON data.
ProgressEvent = tuple[str, dict[str, JsonValue]]

_ATTEMPT_FIELDS = ("status", "reason", "results", "evidence_count", "duration_ms")


def progress_event(event: AuditEvent) -> ProgressEvent | None:
    """The progress ``event`` stands for, or None when it is not one."""
    detail = event.detail
    if (event.stage, event.event) == ("planner", "plan"):
        plan: Any = detail.get("plan") or {}
        return "plan", {
            "source": detail.get("source"),
            "fallback_reason": detail.get("fallback_reason"),
            "query_kind": plan.get("query_kind"),
            "answer_contract": plan.get("answer_contract"),
            "plan": plan,
        }
    if (event.stage, event.event) == ("gateway", "attempt"):
        data: dict[str, JsonValue] = {"adapter": detail.get("adapter_id")}
        data.update({key: detail.get(key) for key in _ATTEMPT_FIELDS})
        data["pages_read"] = detail.get("pages_fetched")
        return "attempt", data
    if (event.stage, event.event) == ("verifier", "outcome"):
        return "verified", {"status": detail.get("status"), "reason": detail.get("reason")}
    return None


def describe(progress: ProgressEvent) -> str:
    """One line for a person watching a terminal."""
    name, data = progress
    if name == "plan":
        return f"plan: {data['query_kind']} ({data['answer_contract']}, from {data['source']})"
    if name == "attempt":
        why = f", {data['reason']}" if data.get("reason") else ""
        return f"attempt: {data['adapter']} {data['status']}{why} ({data['pages_read']} pages read)"
    why = f" ({data['reason']})" if data.get("reason") else ""
    return f"verified: {data['status']}{why}"
