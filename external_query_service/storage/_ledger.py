"""The ledger's interface and the factory that picks its backend.

A ledger is named by a *target*: a ``Path`` (an embedded SQLite file, the default) or a
``postgresql://`` URL (one PostgreSQL schema shared by many processes). Both backends
keep the same records, ids, hash chain and rules (``base.py``); callers hold a
``Ledger`` and never need to know which one they have.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol, Self

from .._clock import Clock, system_clock
from ..admission._chain import ChainRecord
from ..admission._models import Admission, EvidencePlan, EvidenceReceipt, LedgerCoverage
from ..settings import LedgerSettings, Settings, is_ledger_url
from ._base import DEFAULT_SOURCE_BUDGET, BaseLedger, RecordKind, copy_ledger
from ._models import (
    Backend,
    LedgerCopy,
    LedgerEntry,
    LedgerError,
    LedgerHead,
    LedgerMigration,
    LedgerProject,
    LedgerRun,
    LedgerTarget,
    LedgerVerification,
    show_target,
)

__all__ = [
    "APP_FOLDER",
    "LEDGER_FILE",
    "Ledger",
    "LedgerTarget",
    "copy_ledger_to",
    "default_ledger_path",
    "is_ledger_url",
    "migrate_ledger",
    "open_configured_ledger",
    "open_ledger",
    "parse_ledger_target",
    "resolve_ledger",
    "show_target",
]

APP_FOLDER = "external-query"
LEDGER_FILE = "ledger.sqlite3"


class Ledger(Protocol):
    """What every ledger does. Writes are one transaction each and idempotent (records are
    keyed by their content id); blockers are results, not exceptions; storage faults are
    ``LedgerError``."""

    #: The ledger as shown to people: a path, or a URL without its password.
    target: str

    @property
    def backend(self) -> Backend:
        """Which storage this ledger uses: ``sqlite`` or ``postgresql``."""
        ...

    def __enter__(self) -> Self: ...

    def __exit__(self, *exc: object) -> None: ...

    def close(self) -> None:
        """Close the ledger; idempotent."""
        ...

    def record(self, kind: RecordKind, digest: str, body: Mapping[str, Any]) -> LedgerEntry:
        """Store one record under its content digest (the same record twice is one)."""
        ...

    def record_receipt(self, plan: EvidencePlan, receipt: EvidenceReceipt) -> list[LedgerEntry]:
        """Store a receipt after checking it against its plan."""
        ...

    def record_admission(
        self, plan: EvidencePlan, receipt: EvidenceReceipt, admission: Admission
    ) -> list[LedgerEntry]:
        """Store an admission after checking it against its plan and receipt."""
        ...

    def persist_chain(self, record: ChainRecord) -> list[LedgerEntry]:
        """Store an answer's plans, receipts and admissions in one transaction."""
        ...

    def has_record(self, digest: str) -> bool:
        """True when a record with ``digest`` is stored."""
        ...

    def run_of(self, plan_id: str) -> LedgerRun | None:
        """The plan ``plan_id`` and the answer runs that bound it; None when not held."""
        ...

    def count(self, kind: RecordKind | None = None) -> int:
        """How many records the ledger holds."""
        ...

    def start_project(
        self, project: str, question: str, *, source_budget: int = DEFAULT_SOURCE_BUDGET
    ) -> LedgerProject:
        """Start (or find) a project asking ``question``, with a source budget."""
        ...

    def project(self, name: str) -> LedgerProject | None:
        """The project named ``project``, or None."""
        ...

    def coverage(self, project: str, plan: EvidencePlan, admission: Admission) -> LedgerCoverage:
        """What a project's readback has covered so far."""
        ...

    def write_readback(
        self, project: str, plan: EvidencePlan, receipt: EvidenceReceipt, admission: Admission
    ) -> LedgerCoverage:
        """Write an admission's sources back into a project, under the readback rules."""
        ...

    def downstream_for(self, admission: Admission) -> list[tuple[str, str]]:
        """The projects an admission's sources were read back into."""
        ...

    def schema_version(self) -> int:
        """The schema version stored in the ledger (None before migrate)."""
        ...

    def migrate(self) -> LedgerMigration:
        """Create or update the schema to the current version (the only place that does)."""
        ...

    def integrity_check(self) -> str:
        """The storage's own integrity check."""
        ...

    def verify(self, expect_head: LedgerHead | None = None) -> LedgerVerification:
        """Recompute every digest and the hash chain and check it reaches the head kept
        beside it (and ``expect_head``); report the first bad record, if any."""
        ...

    def stored_head(self) -> LedgerHead | None:
        """The head kept beside the chain (None before the first anchored commit)."""
        ...


def default_ledger_path(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_DATA_HOME/external-query/ledger.sqlite3``, else under ``~/.local/share``."""
    env = os.environ if env is None else env
    base = env.get("XDG_DATA_HOME", "").strip()
    root = Path(base) if base and Path(base).is_absolute() else Path.home() / ".local" / "share"
    return root / APP_FOLDER / LEDGER_FILE


def parse_ledger_target(text: str | Path) -> LedgerTarget:
    """A ``postgresql://`` URL stays text (libpq gets it unchanged); anything else is a
    file path."""
    if isinstance(text, str) and is_ledger_url(text):
        return text
    return Path(text)


def resolve_ledger(
    explicit: str | Path | None = None,
    settings: Settings | None = None,
    env: Mapping[str, str] | None = None,
) -> LedgerTarget:
    """``--ledger`` wins, then ``[ledger] url`` or ``path``, then the user's data folder."""
    if explicit is not None:
        return parse_ledger_target(explicit)
    if settings is not None and settings.ledger.url is not None:
        return settings.ledger.url
    if settings is not None and settings.ledger.path is not None:
        return settings.ledger.path
    return default_ledger_path(env)


def open_ledger(
    target: LedgerTarget,
    *,
    create: bool = True,
    check_schema: bool = True,
    clock: Clock = system_clock,
) -> Ledger:
    """Open the ledger ``target`` names. A schema that is missing or older is
    ``LedgerError('ledger_needs_migration')`` unless ``check_schema=False`` (for
    ``migrate``). ``create=False``: a missing SQLite file is an error; ``create=True``
    makes a missing SQLite file with the current schema. A PostgreSQL schema is never
    created by opening."""
    return _open(target, create=create, check_schema=check_schema, clock=clock)


def _open(
    target: LedgerTarget,
    *,
    create: bool = True,
    check_schema: bool = True,
    clock: Clock = system_clock,
) -> BaseLedger:
    if isinstance(target, Path):
        from ._sqlite import SQLiteLedger

        # Only the default ledger's folder is this program's to make; a folder the reader
        # named and that does not exist is a mistake to report, not to paper over.
        own = target == default_ledger_path()
        return SQLiteLedger(
            target, create=create, check_schema=check_schema, clock=clock, make_folder=own
        )
    try:
        from ._postgres import PostgresLedger
    except ImportError:
        raise LedgerError(
            "ledger_unavailable",
            "a postgresql:// ledger needs psycopg: pip install 'external_query_service[postgres]'",
        ) from None
    return PostgresLedger(target, check_schema=check_schema, clock=clock)


def open_configured_ledger(
    settings: LedgerSettings, *, clock: Clock = system_clock
) -> Ledger | None:
    """The ledger ``[ledger]`` names (``url`` or ``path``), or None when it names none."""
    if settings.url is not None:
        return open_ledger(settings.url, clock=clock)
    if settings.path is not None:
        return open_ledger(settings.path, clock=clock)
    return None


def migrate_ledger(target: LedgerTarget) -> LedgerMigration:
    """Create or bring up to date the schema of ``target`` (``ledger migrate``)."""
    with open_ledger(target, check_schema=False) as ledger:
        return ledger.migrate()


def copy_ledger_to(source: LedgerTarget, target: LedgerTarget) -> LedgerCopy:
    """Copy the ledger ``source`` into ``target`` (migrated beforehand) and verify the
    copy; see ``base.copy_ledger``."""
    if show_target(source) == show_target(target):
        raise LedgerError(
            "ledger_copy_conflict", f"{show_target(source)} is both source and target"
        )
    with _open(source, create=False) as read, _open(target, create=False) as write:
        return copy_ledger(read, write)
