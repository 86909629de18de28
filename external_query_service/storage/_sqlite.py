"""The embedded ledger: one SQLite file, for one process (or a few on one machine).

Durability: WAL, ``synchronous=FULL``, every write one ``BEGIN IMMEDIATE`` transaction
(so a killed writer leaves either the whole write or none of it, and writers of other
processes wait their turn) and a ``busy_timeout``.

The head (last seq, chain value, record count, and the head's own digest) is written after
every commit that moved it to ``<file>.head`` beside the ledger: JSON, replaced atomically
(temporary file, fsync, rename) under an exclusive lock on ``<file>.head.lock``, and never
moved backwards (a slower writer of an older head leaves the newer one). A write that would
move the chain's end over a head it cannot verify (unreadable, missing beside records, not
reached by the chain) is rolled back with ``LedgerError('ledger_head_mismatch')``. A writer
killed between its commit and the head write leaves the head one write behind, which
``verify`` accepts; a chain that no longer reaches the head is ``head_mismatch``.

A missing (or empty) file is given the current schema by a writing open (the embedded
default needs no setup step); an existing file is never migrated implicitly: an older
schema answers ``ledger_needs_migration``.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .._clock import Clock, system_clock
from ._base import SCHEMA_V1, BaseLedger, Tx
from ._models import LedgerError, LedgerHead

__all__ = ["SQLiteLedger", "missing_place"]


class _SQLiteTx:
    """``Tx`` over one sqlite3 connection (``?`` is SQLite's own placeholder)."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def one(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        row: tuple[Any, ...] | None = self._db.execute(sql, params).fetchone()
        return row

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return list(self._db.execute(sql, params).fetchall())

    def run(self, sql: str, params: Sequence[Any] = ()) -> int:
        return self._db.execute(sql, params).rowcount

    def run_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        self._db.executemany(sql, rows)


def missing_place(path: Path, *, create: bool, make_folder: bool = False) -> LedgerError | None:
    """The error for a ledger file that cannot be where ``path`` says: its folder does not
    exist (and is not to be made), or, for an open that must not create it, the file does
    not exist. None when the place is fine. One wording for every caller (``ask`` with a
    ``[ledger] path``, ``ledger verify``, ...)."""
    if not make_folder and not path.parent.is_dir():
        detail = f"the folder {path.parent} does not exist; create it, or name a file in one"
        return LedgerError("ledger_unavailable", f"{path}: {detail}")
    if not create and not path.exists():
        detail = "there is no ledger file there; check the path"
        return LedgerError("ledger_unavailable", f"{path}: {detail}")
    return None


class SQLiteLedger(BaseLedger):
    """One SQLite ledger file. Thread-safe (one lock around one connection).

    ``create=False`` refuses to create a missing file (read-only uses); ``create=True``
    gives a new file the current schema. ``check_schema=False`` opens a file whatever its
    schema, for ``migrate()``. A file is made only in a folder that exists, unless
    ``make_folder`` (the default ledger's own data folder); a missing folder or file is
    refused by ``missing_place``, so every command says it the same way.
    """

    backend = "sqlite"
    migrations = (tuple(statement.format(seq="INTEGER") for statement in SCHEMA_V1),)
    meta_exists_sql = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'"

    def __init__(
        self,
        path: str | Path,
        *,
        create: bool = True,
        check_schema: bool = True,
        busy_timeout_ms: int = 5000,
        clock: Clock = system_clock,
        make_folder: bool = False,
    ) -> None:
        self.path = Path(path)
        super().__init__(str(self.path), clock)
        self._lock = threading.Lock()
        missing = missing_place(self.path, create=create, make_folder=make_folder)
        if missing is not None:
            raise missing
        self._anchored: LedgerHead | None = None  # the last head this ledger wrote
        try:
            if create and make_folder:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            mode = "rwc" if create else "rw"
            self._db = sqlite3.connect(
                f"file:{self.path}?mode={mode}",
                uri=True,
                timeout=busy_timeout_ms / 1000,
                isolation_level=None,  # explicit BEGIN IMMEDIATE; no implicit transactions
                check_same_thread=False,
            )
        except (OSError, sqlite3.Error) as exc:
            raise LedgerError("ledger_unavailable", f"{self.path}: {exc}") from None
        try:
            self._setup(busy_timeout_ms, create=create, check_schema=check_schema)
        except BaseException:
            self._db.close()
            raise

    def _setup(self, busy_timeout_ms: int, *, create: bool, check_schema: bool) -> None:
        # Switching to WAL (and the first checkpoint of a closing peer) can answer "locked"
        # without waiting on the busy handler, so the setup retries within the same budget.
        deadline = time.monotonic() + busy_timeout_ms / 1000
        while True:
            try:
                self._db.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
                if self._db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                    self._db.execute("PRAGMA journal_mode = WAL")
                # FULL: a committed receipt survives power loss, not only a process crash.
                self._db.execute("PRAGMA synchronous = FULL")
                self._db.execute("PRAGMA foreign_keys = ON")
                if not check_schema:
                    return
                if create and self._empty():
                    self.migrate()  # a new file: the embedded default needs no setup step
                self.check_schema()
                return
            except (sqlite3.Error, LedgerError) as exc:
                error = exc if isinstance(exc, LedgerError) else _mapped(exc, self.path)
                if error.reason != "ledger_busy" or time.monotonic() >= deadline:
                    raise error from None
                time.sleep(0.02)

    def _empty(self) -> bool:
        with self._read() as tx:
            return tx.one("SELECT 1 FROM sqlite_master LIMIT 1") is None

    # -- lifecycle ------------------------------------------------------------------------
    def close(self) -> None:
        with self._lock:
            self._db.close()

    @contextmanager
    def _write(self) -> Iterator[Tx]:
        """One ``BEGIN IMMEDIATE`` transaction: committed whole or rolled back whole."""
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise _mapped(exc, self.path) from None
            tx = _SQLiteTx(self._db)
            try:
                problem = self._unverified_head(tx)
                before = self._head_in(tx) if problem is not None else None
                yield tx
            except sqlite3.Error as exc:
                self._rollback()
                raise _mapped(exc, self.path) from None
            except BaseException:
                self._rollback()
                raise
            head = self._head_in(tx)
            if problem is not None and head != before:
                self._rollback()
                raise self._refuse_unverified(problem)
            moved = head is not None and head != self._anchored
            # The head lock is held from the commit until the head file follows it: another
            # writer's check reads the head under the same lock (``_stored_head_in``), so it
            # never sees records whose head is still being written.
            with self._head_lock(fcntl.LOCK_EX if moved else None):
                try:
                    self._db.execute("COMMIT")
                except sqlite3.Error as exc:
                    self._rollback()
                    raise _mapped(exc, self.path) from None
                if moved and head is not None:
                    self._write_head(head)

    def _rollback(self) -> None:
        if self._db.in_transaction:
            self._db.execute("ROLLBACK")

    @contextmanager
    def _read(self) -> Iterator[Tx]:
        with self._lock:
            try:
                yield _SQLiteTx(self._db)
            except sqlite3.Error as exc:
                raise _mapped(exc, self.path) from None

    def integrity_check(self) -> str:
        with self._read() as tx:
            row = tx.one("PRAGMA integrity_check")
        return str(row[0]) if row is not None else "no answer"

    # -- the head file --------------------------------------------------------------------
    @property
    def head_path(self) -> Path:
        """``<file>.head``: where the head is kept, beside the ledger."""
        return self.path.with_name(self.path.name + ".head")

    def stored_head(self) -> LedgerHead | None:
        try:
            text = self.head_path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise LedgerError("ledger_head_mismatch", f"{self.head_path}: {exc}") from None
        return LedgerHead.from_sealed_json(text, str(self.head_path))

    @contextmanager
    def _head_lock(self, mode: int | None) -> Iterator[None]:
        """``<file>.head.lock`` held in ``mode`` (``fcntl.LOCK_EX`` or ``LOCK_SH``) for the
        block; no lock at all with ``None``."""
        if mode is None:
            yield
            return
        lock_path = self.path.with_name(self.path.name + ".head.lock")
        try:
            lock = open(lock_path, "a", encoding="utf-8")  # noqa: SIM115 (held for the block)
        except OSError as exc:
            raise LedgerError("ledger_unavailable", f"{lock_path}: {exc}") from None
        with lock:
            try:
                fcntl.flock(lock, mode)
            except OSError as exc:
                raise LedgerError("ledger_unavailable", f"{lock_path}: {exc}") from None
            yield

    def _stored_head_in(self, tx: Tx) -> LedgerHead | None:
        with self._head_lock(fcntl.LOCK_SH):
            return self.stored_head()

    def _write_head(self, head: LedgerHead) -> None:
        """Replace the head file with ``head`` unless it already holds a later one (the
        caller holds the head lock)."""
        try:
            # An unreadable head is left as it is (``LedgerError``): it is the evidence
            # ``verify`` reports, and was readable when this write began.
            kept = self.stored_head()
            if kept is None or kept.seq < head.seq:
                _replace(self.head_path, head.sealed_json() + "\n")
        except OSError as exc:
            # The records are committed; a head left behind is caught by ``verify``.
            raise LedgerError("ledger_unavailable", f"{self.head_path}: {exc}") from None
        self._anchored = head


def _replace(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically and durably: temporary file, fsync, rename."""
    temporary = path.with_name(path.name + ".tmp")
    with open(temporary, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)


def _mapped(exc: sqlite3.Error, path: Path) -> LedgerError:
    text = str(exc)
    if "locked" in text or "busy" in text:
        return LedgerError("ledger_busy", f"{path}: {text}")
    if "no such table" in text:
        return LedgerError(
            "ledger_needs_migration",
            f"{path}: {text}: run `external-query ledger migrate` with the same --ledger",
        )
    return LedgerError("ledger_unavailable", f"{path}: {text}")
