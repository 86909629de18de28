"""One rendering for every contract record: JSON (the record itself) or Markdown.

JSON output is the record as its model dumps it, so a saved ``plan`` or ``admit`` output
is the next command's input. Markdown is for people and chat transports; evidence text
in it is already compact (one line) and is shown as data.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel

from ._models import (
    Admission,
    EvidencePlan,
    EvidenceReceipt,
    ProviderInventory,
    Readback,
    ReadbackSource,
    ReceiptObservation,
    Retirement,
)
from ._projection import compact

__all__ = ["Format", "render", "render_error"]

Format = Literal["json", "markdown"]


def render(record: BaseModel, fmt: Format) -> str:
    """``record`` as JSON (indented, UTF-8 text) or Markdown; always ends with a newline."""
    if fmt == "json":
        return json.dumps(record.model_dump(mode="json"), ensure_ascii=False, indent=2) + "\n"
    for kind, renderer in _MARKDOWN:
        if isinstance(record, kind):
            return renderer(record).rstrip() + "\n"
    return _generic(record).rstrip() + "\n"


def render_error(code: str, message: str, exit_code: int, fmt: Format) -> str:
    """An error as ``{"error", "code", "exit_code"}`` JSON, or one Markdown line."""
    if fmt == "json":
        data = {"error": compact(message, 2000), "code": code, "exit_code": exit_code}
        return json.dumps(data, ensure_ascii=False) + "\n"
    return f"**error** `{code}` (exit {exit_code}): {compact(message, 2000)}\n"


def _flag(value: bool | None) -> str:
    return "—" if value is None else ("yes" if value else "no")


def _inventory(record: Any) -> str:
    inventory: ProviderInventory = record
    lines = [
        "## Provider inventory",
        f"protocol `{inventory.protocol}` · execution observed: no · "
        "evidence coverage observed: no",
        "",
        "| provider | kind | declared | installed | enabled | ready | why not ready |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in inventory.providers:
        lines.append(
            f"| `{row.provider_id}` | {row.provider_kind} | {_flag(row.declared)} | "
            f"{_flag(row.installed)} | {_flag(row.enabled)} | {_flag(row.ready)} | "
            f"{row.unavailable_reason or ''} |"
        )
    if not inventory.providers:
        lines.append("| (none) | | | | | | |")
    return "\n".join(lines)


def _plan(record: Any) -> str:
    plan: EvidencePlan = record
    request = plan.request
    selected = plan.selected_provider
    lines = [
        "## Evidence plan",
        f"- plan_id: `{plan.plan_id}`",
        f"- request_id: `{request.request_id}`",
        f"- objective: {compact(request.objective)}",
        f"- user activity: {compact(request.user_activity)}",
        f"- decision: {compact(request.decision)}",
        f"- evidence kinds: {', '.join(request.evidence_kinds)}",
        f"- selected provider: `{selected.provider_id}` ({selected.provider_kind}, "
        f"{selected.selected_by})",
        f"- candidates: {len(plan.candidates)} "
        f"({sum(1 for row in plan.candidates if row.ready)} ready)",
    ]
    return "\n".join(lines)


def _observation(record: Any) -> str:
    seen: ReceiptObservation = record
    return "\n".join(
        [
            "## Receipt observed",
            f"- plan_id: `{seen.plan_id}`",
            f"- provider: `{seen.provider_id}` ({seen.provider_kind})",
            f"- status: {seen.status} · sources: {len(seen.source_refs)}",
            f"- receipt digest: `{seen.receipt_digest}`",
            f"- completed at: {seen.completed_at}",
            "- recorded as an observation only: not execution proof, not coverage, not admission",
        ]
    )


def _receipt(record: Any) -> str:
    receipt: EvidenceReceipt = record
    lines = [
        "## Evidence receipt",
        f"- plan_id: `{receipt.plan_id}`",
        f"- provider: `{receipt.provider_id}` ({receipt.provider_kind})",
        f"- status: {receipt.status} · completed at: {receipt.completed_at}",
    ]
    if receipt.summary.strip():
        lines.append(f"- summary: {compact(receipt.summary)}")
    lines.extend(f"- limitation: {compact(item)}" for item in receipt.limitations)
    for index, source in enumerate(receipt.sources, 1):
        lines.append(f"{index}. `{source.source_ref}` — {compact(source.finding)}")
    return "\n".join(lines)


def _admission(record: Any) -> str:
    admission: Admission = record
    lines = [
        "## Admission",
        f"- admission_id: `{admission.admission_id}`",
        f"- decision: **{admission.decision}** by {admission.decided_by}: "
        f"{compact(admission.reason)}",
        f"- plan_id: `{admission.plan_id}`",
        f"- receipt digest: `{admission.receipt_digest}` ({admission.receipt_status})",
    ]
    lines.extend(f"- admitted: `{ref}`" for ref in admission.admitted_source_refs)
    return "\n".join(lines)


def _retirement(record: Any) -> str:
    retirement: Retirement = record
    lines = [
        "## Retirement",
        f"- admission_id: `{retirement.admission_id}`",
        f"- decision: {retirement.decision} · state: **{retirement.state}**",
    ]
    lines.extend(f"- read back: `{ref}`" for ref in retirement.read_back_source_refs)
    lines.extend(f"- missing: `{ref}`" for ref in retirement.missing_source_refs)
    lines.extend(f"- reason: {item}" for item in retirement.reasons)
    return "\n".join(lines)


def _source_lines(index: int, source: ReadbackSource) -> list[str]:
    marks = []
    if source.admitted is not None:
        marks.append("admitted" if source.admitted else "not admitted")
    if source.in_ledger is not None:
        marks.append("in ledger" if source.in_ledger else "not in ledger")
    suffix = f" — {', '.join(marks)}" if marks else ""
    reference = source.url or source.source_ref
    return [
        f"{index}. `{reference}` ({source.source_family} · {source.basis}){suffix}",
        f"   - finding: {source.finding}",
        f"   - limitation: {source.limitation}",
        f"   - published: {source.publication_date or 'unknown'} · accessed: "
        f"{source.accessed_at} · digest: `{source.content_digest}`",
    ]


def _readback(record: Any) -> str:
    readback: Readback = record
    lines = [
        "## Evidence readback",
        f"- objective: {readback.objective}",
        f"- user activity: {readback.user_activity}",
        f"- decision: {readback.decision}",
        f"- evidence kinds: {', '.join(readback.evidence_kinds)}",
        f"- plan_id: `{readback.plan_id}`",
        f"- provider: `{readback.provider_id}` ({readback.provider_kind})",
        f"- receipt: {readback.receipt_status} · `{readback.receipt_digest}` · "
        f"completed {readback.completed_at}",
    ]
    if readback.summary:
        lines.append(f"- summary: {readback.summary}")
    lines.extend(f"- limitation: {item}" for item in readback.limitations)
    if readback.admission_id is not None:
        lines.append(
            f"- parent decision: **{readback.admission_decision}** by {readback.decided_by}: "
            f"{readback.admission_reason} (`{readback.admission_id}`)"
        )
    lines.append("")
    lines.append("### Sources")
    if not readback.sources:
        lines.append("(none)")
    for index, source in enumerate(readback.sources, 1):
        lines.extend(_source_lines(index, source))
    if readback.ledger is not None:
        ledger = readback.ledger
        lines += [
            "",
            "### Research ledger",
            f"- project: {ledger.project} · question matches objective: "
            f"{_flag(ledger.question_matches)} · written now: {len(ledger.written_source_refs)}",
            f"- coverage: {ledger.state} ({len(ledger.present_source_refs)} present, "
            f"{len(ledger.missing_source_refs)} missing)",
        ]
        lines.extend(f"- write blocker: {item}" for item in ledger.write_blockers)
    if readback.retirement is not None:
        lines += [
            "",
            "### Retirement",
            f"- state: **{readback.retirement.state}**",
        ]
        lines.extend(f"- reason: {item}" for item in readback.retirement.reasons)
    return "\n".join(lines)


def _generic(record: BaseModel) -> str:
    # A record may name its own heading; otherwise its class name stands in.
    title = getattr(record, "markdown_title", type(record).__name__)
    lines = [f"## {title}"]
    for key, value in record.model_dump(mode="json").items():
        if isinstance(value, list):
            shown = ", ".join(f"`{item}`" if isinstance(item, str) else str(item) for item in value)
            lines.append(f"- {key}: {shown or '(none)'}")
        elif isinstance(value, dict):
            lines.append(f"- {key}: {compact(json.dumps(value, ensure_ascii=False))}")
        else:
            lines.append(f"- {key}: {value}")
    return "\n".join(lines)


_MARKDOWN: tuple[tuple[type[BaseModel], Callable[[Any], str]], ...] = (
    (ProviderInventory, _inventory),
    (EvidencePlan, _plan),
    (ReceiptObservation, _observation),
    (EvidenceReceipt, _receipt),
    (Admission, _admission),
    (Retirement, _retirement),
    (Readback, _readback),
)
