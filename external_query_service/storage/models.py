"""What a ledger answers with, whatever stores it: results, reports and its one error."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict

from ..errors import ExternalQueryError

__all__ = [
    "Backend",
    "LedgerCopy",
    "LedgerEntry",
    "LedgerError",
    "LedgerMigration",
    "LedgerProject",
    "LedgerVerification",
    "UnsoundLedger",
]

Backend = Literal["sqlite", "postgresql"]


class LedgerError(ExternalQueryError):
    """The ledger cannot be used. ``reason``:

    - ``ledger_unavailable``: it cannot be opened, reached, created or read (also a schema
      newer than this program knows);
    - ``ledger_busy``: another writer held the lock past the timeout (retryable);
    - ``ledger_needs_migration``: its schema is missing or older than this program's; run
      ``external-query ledger migrate``;
    - ``ledger_copy_conflict``: ``ledger copy`` met a target holding other records;
    - ``ledger_unsound``: a ledger that does not verify (``UnsoundLedger``).
    """

    def __init__(self, reason: str, detail: str) -> None:
        self.reason = reason
        self.detail = detail
        super().__init__(f"{reason}: {detail}")

    @property
    def retryable(self) -> bool:
        """True for ``ledger_busy``: another writer held the lock; trying again may work."""
        return self.reason == "ledger_busy"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class LedgerEntry(_Frozen):
    """One stored record: its seq, kind, digest, and whether this call wrote it."""

    kind: str
    digest: str
    seq: int
    inserted: bool


class LedgerProject(_Frozen):
    """A readback project: its question, source budget and creation time."""

    markdown_title: ClassVar[str] = "Research project"

    project: str
    question: str
    source_budget: int
    source_count: int
    created: bool


class LedgerVerification(_Frozen):
    """``verify()``: ``ok`` when the storage's own check passed (``integrity``: SQLite's
    ``PRAGMA integrity_check``; PostgreSQL keeps its own consistency and reports ``ok``) and
    every record's body digest, content id, seq and chain link recompute."""

    markdown_title: ClassVar[str] = "Ledger verification"

    ok: bool
    records: int
    integrity: str
    first_bad_seq: int | None = None
    problem: str | None = None
    #: The chain value of the last record (the genesis value for an empty ledger): two
    #: ledgers whose last chains match hold the same records in the same order.
    last_chain: str | None = None


class LedgerMigration(_Frozen):
    """What ``migrate`` did: the schema version before and after."""

    markdown_title: ClassVar[str] = "Ledger migration"

    backend: Backend
    ledger: str
    from_version: int
    to_version: int
    applied: tuple[int, ...]


class LedgerCopy(_Frozen):
    """What ``copy`` did: records copied, and the chain value both ledgers end on."""

    markdown_title: ClassVar[str] = "Ledger copy"

    source: str
    target: str
    records_copied: int
    records: int
    projects: int
    project_sources: int
    verification: LedgerVerification


class UnsoundLedger(LedgerError):
    """A ledger that does not verify where an operation needs a sound one (``ledger
    copy``'s source before, and its target after copying)."""

    def __init__(self, target: str, verification: LedgerVerification) -> None:
        self.verification = verification
        where = f" at seq {verification.first_bad_seq}" if verification.first_bad_seq else ""
        found = verification.problem or f"integrity {verification.integrity}"
        super().__init__("ledger_unsound", f"{target} does not verify: {found}{where}")
