"""Saved evidence reports and their artifact receipts.

A report is JSON (UTF-8, keys in model order, two-space indent, final newline) written to
a NEW file inside the task's reports folder (``O_EXCL``: an existing file is never
overwritten). Its digest is the sha256 of exactly those bytes. A receipt re-reads the
saved file and says whether it still equals the report the task holds in memory.
"""

from __future__ import annotations

import json
from datetime import datetime

from pydantic import StrictBool

from .._frozen import Frozen

__all__ = [
    "ArtifactReceipt",
    "CategoryCheck",
    "EvidenceRecord",
    "ReportSource",
    "TaskIdentity",
    "TaskReport",
    "report_bytes",
]


class EvidenceRecord(Frozen):
    """A quote for a category: ``quote == store.quote(ref, offset, length)``."""

    category: str
    ref: str
    offset: int
    length: int
    quote: str
    source: str


class CategoryCheck(Frozen):
    """Whether a required category is backed by a captured passage holding its marker.

    ``reason``: ``quote_verified``, ``no_record``, ``quote_mismatch`` or ``marker_missing``.
    """

    category: str
    passed: StrictBool
    reason: str
    ref: str | None = None
    offset: int | None = None
    length: int | None = None


class ReportSource(Frozen):
    """A capture a report rests on: reference, source, digest and length."""

    ref: str
    source: str
    digest: str
    length: int


class TaskIdentity(Frozen):
    """Which task a report is for: its name, source and digest."""

    name: str
    source: str
    digest: str


class TaskReport(Frozen):
    """A task's saved report: its records, category checks and sources."""

    task: TaskIdentity
    inputs_digest: str
    records: tuple[EvidenceRecord, ...]
    checks: tuple[CategoryCheck, ...]
    sources: tuple[ReportSource, ...]
    created_at: datetime


class ArtifactReceipt(Frozen):
    """What is on disk: ``matches`` is True only when the saved file's bytes equal the
    report the task holds now; ``digest`` is the sha256 of the bytes last saved."""

    path: str
    exists: StrictBool
    matches: StrictBool
    record_count: int
    digest: str | None
    sources: tuple[str, ...]


def report_bytes(report: TaskReport) -> bytes:
    """The report as it is saved: indented UTF-8 JSON with a final newline."""
    return (json.dumps(report.model_dump(mode="json"), ensure_ascii=False, indent=2) + "\n").encode(
        "utf-8"
    )
