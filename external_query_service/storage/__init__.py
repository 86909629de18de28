"""Storage backends: the research ledger in SQLite (embedded) or PostgreSQL (shared).

See ``README.md`` in this folder for its rule. ``open_ledger`` picks the backend from the
target; the PostgreSQL backend is imported only when a ``postgresql://`` target is used.
"""

from __future__ import annotations

from ._base import DEFAULT_SOURCE_BUDGET, SCHEMA_VERSION, BaseLedger, RecordKind
from ._ledger import (
    Ledger,
    LedgerTarget,
    copy_ledger_to,
    default_ledger_path,
    migrate_ledger,
    open_configured_ledger,
    open_ledger,
    parse_ledger_target,
    resolve_ledger,
    show_target,
)
from ._models import (
    LedgerCopy,
    LedgerEntry,
    LedgerError,
    LedgerHead,
    LedgerMigration,
    LedgerProject,
    LedgerRun,
    LedgerRunRecord,
    LedgerVerification,
    UnsoundLedger,
)
from ._sqlite import SQLiteLedger

__all__ = [
    "DEFAULT_SOURCE_BUDGET",
    "SCHEMA_VERSION",
    "BaseLedger",
    "Ledger",
    "LedgerCopy",
    "LedgerEntry",
    "LedgerError",
    "LedgerHead",
    "LedgerMigration",
    "LedgerProject",
    "LedgerRun",
    "LedgerRunRecord",
    "LedgerTarget",
    "LedgerVerification",
    "RecordKind",
    "SQLiteLedger",
    "UnsoundLedger",
    "copy_ledger_to",
    "default_ledger_path",
    "migrate_ledger",
    "open_configured_ledger",
    "open_ledger",
    "parse_ledger_target",
    "resolve_ledger",
    "show_target",
]
