"""The research ledger's former home, kept so existing imports keep working.

The ledger now lives in ``storage/`` (interface and factory in ``storage/ledger.py``,
backends in ``storage/sqlite.py`` and ``storage/postgres.py``). Here ``Ledger`` is still
the SQLite ledger it always was: ``Ledger(path)`` opens a file. New code imports from
``external_query_service.storage`` and opens ledgers with ``open_ledger``.
"""

from __future__ import annotations

from .storage import (
    DEFAULT_SOURCE_BUDGET,
    LedgerEntry,
    LedgerError,
    LedgerProject,
    LedgerVerification,
    default_ledger_path,
)
from .storage import SQLiteLedger as Ledger

__all__ = [
    "DEFAULT_SOURCE_BUDGET",
    "Ledger",
    "LedgerEntry",
    "LedgerError",
    "LedgerProject",
    "LedgerVerification",
    "default_ledger_path",
]
